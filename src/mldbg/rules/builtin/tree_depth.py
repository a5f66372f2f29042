"""Trees grow deeper than `depth` levels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mldbg.rules.base import Finding, Rule, register

if TYPE_CHECKING:
    from mldbg.rules.view import TrialView


@register
class TreeDepth(Rule):
    """Trees of a boosted ensemble grow deeper than `depth` levels (edges from the root to the
    deepest leaf). A deep tree carves the training data into tiny leaves and memorizes it.

    Default `depth=10`: XGBoost's own default is `max_depth=6` and tuned tabular models rarely
    need more than 8-10 levels, while a tree of depth 11 can already hold 2,048 leaves.
    (SageMaker's default of 4 would fire on every default booster.) The rule fires once, at the
    first iteration whose trees cross the line, and reads `trees/depth` of the XGBoost hook.

    A tree grown leaf-wise under a bound on its leaves (`grow_policy="lossguide"` with
    `max_leaves` and `max_depth=0`, LightGBM's way) is bounded by its leaves, not its depth:
    31 leaves on a chain of depth 14 hold no more than 31 leaves on depth 5. There the rule
    judges that bound against the same budget: `max_leaves` at most `2**depth` (what a tree of
    depth `depth` can hold) keeps it quiet, whatever depth the chains reach.
    """

    needs = ("trees",)
    depth: int = 10
    suggestion = (
        "Lower max_depth (3-8 suits most tabular data), or raise min_child_weight, gamma "
        "(min_split_loss) or lambda so splits must earn their place; watch the validation "
        "loss with early stopping."
    )

    def check(self, trial: TrialView, step: int) -> Finding | None:
        if not trial.has_tensor("trees/depth"):
            return None
        tensor = trial.tensor("trees/depth")
        if not tensor.has_step(step):
            return None
        depths = tensor.value(step)
        if depths.size == 0 or int(depths.max()) <= self.depth:
            return None
        limit = _hyperparameter(trial, "max_depth")
        max_leaves = _hyperparameter(trial, "max_leaves")
        if not limit and max_leaves and max_leaves <= 2**self.depth:
            return None  # leaf-wise growth bounded by fewer leaves than a tree of `depth` holds
        if not self.first():
            return None
        deep = int((depths > self.depth).sum())
        setting = f" (max_depth={limit:g})" if limit is not None else ""
        if depths.size == 1:
            what = f"the tree grown since the last record reaches depth {int(depths.max())}"
        else:
            what = f"{deep} of the {depths.size} trees grown since the last record reach depth {int(depths.max())}"
        return self.finding(
            trial,
            step,
            f"at iteration {trial.mode_step(step)}, {what}, deeper than depth={self.depth}{setting}",
            tensors=["trees/depth"],
        )


def _hyperparameter(trial: TrialView, name: str) -> float | None:
    full = f"hyperparameters/{name}"
    if not trial.has_tensor(full):
        return None
    tensor = trial.tensor(full)
    steps = tensor.steps()
    return float(tensor.value(steps[0])) if steps else None
