"""A custom rule whose name has characters trackers refuse in keys (the in-process watcher
imports it from here, as a user's rule next to the training script)."""

from mldbg.rules import Rule


class OddName(Rule):
    """Fires once, at step 2, with a message full of quoting trouble."""

    name = "odd rule/α (v2)!*"
    needs = ("losses",)

    def check(self, trial, step):
        if step != 2:
            return []
        return [self.finding(trial, step, 'loss seen {x} "quoted" & <b>', tensors=["loss", "a/b"])]
