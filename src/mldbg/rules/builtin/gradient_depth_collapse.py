"""gradient_depth_collapse: in the first training steps, the gradients of a layer stack's
input-side blocks collapse against its output-side blocks' (a post-LN transformer without
warm-up)."""

from __future__ import annotations

import math
import re

from mldbg.config import Mode
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.stacks import indices
from mldbg.rules.view import TrialView

_MIN_TENSORS = 4  # parameter tensors of a block
# lists of modules that run side by side, not one after the other: a mixture's experts
_PARALLEL = re.compile(r"(?i)expert")
_GRADIENT = "gradient/"


def _block(name: str) -> tuple[str, int, str] | None:
    """(stack, index, rest) of a parameter's gradient `gradient/<stack>.<index>.<rest>`
    (`encoder.layer.3.attention...`, `h.5.mlp...`, `blocks.2.norm1.weight`): its first integer
    component between dots (`mldbg.rules.stacks.indices`)."""
    if not name.startswith(_GRADIENT):
        return None
    for part in indices(name):
        if part.dotted and len(part.before) > len(_GRADIENT) + 1 and len(part.after) > 1:
            return part.before[len(_GRADIENT) : -1], part.number, part.after[1:]
    return None


def stacks(names: list[str], min_blocks: int) -> dict[str, list[list[str]]]:
    """The gradient names of each stack of at least `min_blocks` blocks indexed 0..L-1 with
    the same parameters in each, at least 4 of them (a `ModuleList` of copies of one layer,
    not a `Sequential` of a convolution, a norm, ..., nor a list of embedding tables or of a
    mixture's experts), by block: {stack: [names of block 0, ..., names of block L-1]}."""
    found: dict[str, dict[int, list[str]]] = {}
    for name in names:
        block = _block(name)
        if block is not None:
            found.setdefault(block[0], {}).setdefault(block[1], []).append(name)
    out = {}
    for stack, blocks in found.items():
        n = len(blocks)
        if n < min_blocks or sorted(blocks) != list(range(n)) or _PARALLEL.search(stack.rsplit(".", 1)[-1]):
            continue
        shapes = {frozenset(name.split(f"{stack}.{i}.", 1)[1] for name in blocks[i]) for i in range(n)}
        # the same parameters in every block (copies of one layer), and a layer of several
        # parts (a transformer layer holds 6-16 tensors), not a list of parallel embedding
        # tables or heads (1-2 each)
        if len(shapes) == 1 and len(blocks[0]) >= _MIN_TENSORS:
            out[stack] = [sorted(blocks[i]) for i in range(n)]
    return out


@register
class GradientDepthCollapse(Rule):
    """In the first `horizon` training steps, the ratio of the gradient norm of a layer
    stack's output-side blocks to its input-side blocks' grows `threshold` times above its
    value at the first training step, at `patience` saved training steps in a row.

    A stack is a `ModuleList` of at least `min_blocks` copies of one block of at least 4
    parameter tensors (parameters named `<stack>.<i>.<...>`, i = 0..L-1, the same names under
    every i: a transformer's layers; not a mixture's experts, which run side by side). Its input side is its lowest
    quarter of blocks, its output side its highest quarter. The norm of a side is the root of
    the sum of its gradients' squared norms. The ratio is compared with its own value at the
    first saved training step, so the rule does not depend on the model's scale or on its
    depth profile at init: pre-LN stacks start with larger gradients below, post-LN stacks
    with about the same on every block.

    This is the failure of a post-LN transformer trained without a learning-rate warm-up
    (Xiong et al. 2020, "On Layer Normalization in the Transformer Architecture"; Liu et al.
    2020, "Understanding the Difficulty of Training Transformers"). The first full-size Adam
    updates push the stack into a regime where the gradient reaching the lower blocks through
    the chain of LayerNorms vanishes. The top block keeps its gradient, the lower blocks stop
    learning, and the loss stalls near its initial value.

    How sure (`tests/rules/test_gradient_depth_collapse.py`, a 6-layer post-LN causal LM,
    width 64, Adam, seeds 0-7):
    - at lr 5e-3, where the no-warm-up run stalls and both twins train, the ratio grew
      3.7-56x in the first 20 steps;
    - the twins, a 100-step warm-up and the pre-LN stack, grew at most 1.7x;
    - the same post-LN stack without warm-up at lr 1e-3, which trains, grew at most 2.6x.
    With `threshold=10` the rule finds 3 of those 8 stalled runs (steps 6-8), and seeds 0-2
    at lr 1e-2 (steps 4-6). It misses stalls whose collapse peaks at 4-15x and recovers.

    Only the first `horizon` steps are judged: later, the lower blocks of a healthy stack
    may converge and their gradients shrink. A block with a gradient of exactly 0 (frozen, or
    a ReZero gate still shut) stops the judgement of its stack at that step.
    """

    needs = ("gradients",)
    cause = "learning_rate_too_high"
    threshold: float = 10.0
    patience: int = 3
    horizon: int = 50
    min_blocks: int = 4
    suggestion = (
        "Add a learning-rate warm-up (linear over the first few hundred to few thousand steps), or "
        "move the LayerNorm before each sublayer (pre-LN: norm_first=True in torch.nn.Transformer*), "
        "or lower the learning rate."
    )

    def reset(self) -> None:
        super().reset()
        self._first_train: int | None = None  # the run's first saved training step
        self._stacks: dict[str, list[list[str]]] | None = None
        self._start: dict[str, float] = {}  # stack -> its log ratio at its first judged step
        self._streak: dict[str, tuple[int, int, float]] = {}  # stack -> (steps in a row, first, growth)

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if trial.mode(step) != Mode.TRAIN:
            return None
        if self._first_train is None:
            self._first_train = step
        if step - self._first_train > self.horizon:
            return None
        if not self._stacks:  # read again while none is found (a live run's first steps)
            self._stacks = stacks(trial.names("gradients"), max(2, self.min_blocks))
        for stack, blocks in self._stacks.items():
            ratio = self._log_ratio(trial, step, blocks)
            if ratio is None:
                continue
            start = self._start.setdefault(stack, ratio)
            growth = math.exp(ratio - start)
            if growth < self.threshold:
                self._streak.pop(stack, None)
                continue
            run, first, _ = self._streak.get(stack, (0, step, growth))
            self._streak[stack] = (run + 1, first, growth)
            if run + 1 >= max(1, self.patience) and self.first(stack):
                return self._report(trial, step, stack, blocks, first, growth)
        return None

    def _log_ratio(self, trial: TrialView, step: int, blocks: list[list[str]]) -> float | None:
        """log(|g| of the highest quarter of blocks / |g| of the lowest quarter) at `step`;
        None where a block's gradient is not saved there or is exactly 0."""
        k = max(1, len(blocks) // 4)
        sides = []
        for side in (blocks[-k:], blocks[:k]):
            total = 0.0
            for block in side:
                sq = 0.0
                for name in block:
                    v = trial.statistic(name, step, "l2")
                    if not isinstance(v, float) or not math.isfinite(v):
                        return None
                    sq += v * v
                if sq <= 0.0:
                    return None
                total += sq
            sides.append(0.5 * math.log(total))
        return sides[0] - sides[1]

    def _report(
        self, trial: TrialView, step: int, stack: str, blocks: list[list[str]], first: int, growth: float
    ) -> Finding:
        n = len(blocks)
        k = max(1, n // 4)
        top = f"block {n - 1}" if k == 1 else f"blocks {n - k}-{n - 1}"
        bottom = "block 0" if k == 1 else f"blocks 0-{k - 1}"
        return self.finding(
            trial, step,
            f"in the stack {stack} ({n} blocks), the gradient norm of its output side ({top}) over "
            f"that of its input side ({bottom}) grew {growth:.0f}x from the first training step, "
            f"above {self.threshold:g}x at {max(1, self.patience)} saved training steps in a row "
            f"(steps {first}-{step}): the lower blocks' gradients are collapsing, as in a post-LN "
            "transformer trained without a learning-rate warm-up",
            tensors=[*blocks[0], *blocks[-1]],
        )  # fmt: skip
