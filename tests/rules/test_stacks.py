"""mldbg.rules.stacks: the integer components of record names, the one parsing behind
`vanishing_gradient.stack_families` and `gradient_depth_collapse.stacks`."""

from __future__ import annotations

import re

from mldbg.rules.builtin.gradient_depth_collapse import _block, stacks
from mldbg.rules.builtin.vanishing_gradient import stack_families
from mldbg.rules.stacks import Index, indices

NAMES = [
    "gradient/hidden.0.weight",
    "gradient/0.weight",
    "gradient/encoder.layer.11.attention.self.query.weight",
    "gradient/transformer.h.5.mlp.c_fc.weight",
    "gradient/blocks.2.mlp.0.weight",
    "gradient/layers.0.0.weight",
    "gradient/l_0.1.w",
    "gradient/x.1_2.y",
    "gradient/conv1.weight",
    "gradient/fc2.bias",
    "gradient/Dense_3/kernel",
    "gradient/params/Dense_12/bias",
    "gradient/w_3",
    "gradient/layer10.weight",
    "gradient/h.0a.weight",
    "gradient/.0.w",
]


def test_the_integer_components_of_a_name():
    assert indices("gradient/blocks.2.mlp.0.weight") == [
        Index("gradient/blocks.", 2, ".mlp.0.weight"),
        Index("gradient/blocks.2.mlp.", 0, ".weight"),
    ]
    assert indices("gradient/Dense_3/kernel") == [Index("gradient/Dense_", 3, "/kernel")]
    assert indices("gradient/Dense_3/kernel")[0].family == "gradient/Dense_#/kernel"
    assert [p.dotted for p in indices("gradient/layers.0.0.weight")] == [True, True]
    assert not indices("gradient/Dense_3/kernel")[0].dotted
    for word in (
        "gradient/conv1.weight",
        "gradient/fc2.bias",
        "gradient/layer10.weight",
        "gradient/h.0a.weight",
    ):
        assert indices(word) == [], word  # digits inside a word are no index
    assert [p.number for p in indices("gradient/w_3")] == [3]  # at the end of the name


def test_the_blocks_are_the_old_parsing_s():
    """gradient_depth_collapse's block is the first integer component between dots, as its
    former regex `^gradient/(.+?)\\.(\\d+)\\.(.+)$` read it, on every name above."""
    old = re.compile(r"^gradient/(?P<stack>.+?)\.(?P<index>\d+)\.(?P<rest>.+)$")
    for name in NAMES:
        m = old.match(name)
        assert _block(name) == (None if m is None else (m["stack"], int(m["index"]), m["rest"])), name


def test_both_rules_find_their_stacks_through_it():
    layer = ("attn.q.weight", "attn.k.weight", "attn.v.weight", "mlp.fc.weight", "norm.weight")
    names = [f"gradient/blocks.{i}.{p}" for i in range(6) for p in layer] + ["gradient/head.weight"]
    found = stacks(names, min_blocks=4)
    assert list(found) == ["blocks"] and len(found["blocks"]) == 6
    assert found["blocks"][3] == sorted(f"gradient/blocks.3.{p}" for p in layer)
    plain = [f"gradient/hidden.{i}.weight" for i in (0, 2, 4, 6, 8)] + ["gradient/Dense_1/kernel"]
    shapes = {n: (16, 8) if n.endswith(".0.weight") else (16, 16) for n in plain}
    # the first layer (fed by the data, another shape) is left out
    assert stack_families(plain, shapes.get) == [[f"gradient/hidden.{i}.weight" for i in (2, 4, 6, 8)]]
