"""The integer components of record names, which tell the layers of a stack apart.

A stack of layers built in a loop names its parameters with the layer's index as one
component: `hidden.0.weight` .. `hidden.5.weight` (an `nn.Sequential` or `nn.ModuleList`),
`encoder.layer.3.attention.self.query.weight`, `Dense_1/kernel` .. `Dense_7/kernel` (Flax,
Keras). `indices` finds those components, one parsing for the rules that read stacks:
`vanishing_gradient` (a plain stack's gradient falling toward its input) groups names that
differ in one of them; `gradient_depth_collapse` (a transformer's blocks) takes each name's
first one between dots as its block.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# an integer component: after `.`, `_` or `/` (or `_` itself), before `.`, `_`, `/` or the end
_INDEX = re.compile(r"(?:(?<=[._/])|_)(\d+)(?=[._/]|$)")


class Index(NamedTuple):
    """One integer component of a name: the text `before` it, its value (`number`), the text `after` it."""

    before: str
    number: int
    after: str

    @property
    def family(self) -> str:
        """The name with this component replaced by `#`: the same for every layer of its stack."""
        return f"{self.before}#{self.after}"

    @property
    def dotted(self) -> bool:
        """Between dots (`blocks.2.norm1.weight`): a PyTorch module list's index."""
        return self.before.endswith(".") and self.after.startswith(".")


def indices(name: str) -> list[Index]:
    """The integer components of `name`, first to last: `gradient/blocks.2.mlp.0.weight` has
    2 (before `gradient/blocks.`, after `.mlp.0.weight`) and 0; `Dense_3/kernel` has 3 (before
    `Dense_`). Digits inside a word (`conv1.weight`, `fc2`) are not components."""
    return [Index(name[: m.start(1)], int(m.group(1)), name[m.end(1) :]) for m in _INDEX.finditer(name)]
