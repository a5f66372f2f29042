"""Why rules reached no verdict on a run, said once and truly (`run`, `status`, `check`, the report).

The runner says why it skipped each rule in terms of collections ("needs the relu_activations
collection"). A user reads that as a list of things to fix, most about things their model does
not have: XGBoost trees on a PyTorch run, an MoE router, loss scaling, nine profiler rules. Here
each skip gets the reason that holds for this run (the model has no ReLU the hook sees: a
ReLU written as `clamp(min=0)`, or inside a compiled model), advice that fits how the run was recorded (`mldbg run`, the two lines, a trainer
callback, a hook told which collections to save), and a kind; the commands print one summary
line, and each reason only when asked (`--verbose`). Rules that read only what another framework
records (XGBoost's trees and feature importance) are left out of the count on other runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# collections only a framework of its own records: a rule that reads nothing else is not for
# a run without them (XGBoost's hook records these; no neural network hook does)
OTHER_FRAMEWORK = {"feature_importance": "XGBoost", "trees": "XGBoost"}

# collections that exist only when the model has the layer: their absence is the model's
# shape, and the advice is about the model (a hook with the two lines' statistics, or `mldbg
# run`, records them whenever the model has them)
MODEL_PARTS = {
    "relu_activations": "the model has no nn.ReLU module, nor an F.relu or torch.relu the hook sees (on a layer's "
    "activations in a registered model's forward; none in a torch.compile'd model recorded with "
    "statistics_eager=False; `x.clamp(min=0)` is not seen)",
    "tanh_activations": "the model has no nn.Tanh module (torch.tanh or F.tanh as a function is not seen)",
    "sigmoid_activations": "the model has no nn.Sigmoid module (torch.sigmoid as a function is not seen)",
    "router": "the model has no mixture-of-experts router the hook recognises",
    "attention_logits": "the model has no attention logits the hook recognises",
    "scalars": "the training uses no loss scaling (no torch.amp.GradScaler scale was recorded)",
}
MODEL_ADVICE = {
    "relu_activations": "use nn.ReLU modules to have dead units checked",
    "tanh_activations": "use nn.Tanh modules to have saturation checked",
    "sigmoid_activations": "use nn.Sigmoid modules to have saturation checked",
}
DATA_PARTS = {
    "labels": "no labels were recorded (the hook takes them as the second input of the loss)",
    "predictions": "no predictions were recorded (the hook takes them as the first input of the loss)",
    "inputs": "no model inputs were recorded",
}

PROFILER_MARK = "no profiler data"
PROFILER_ADVICE = {
    "run": "a --hook-config file with `profiler_config: {}` turns the profiler on",
    "callback": "pass profiler_config=mldbg.ProfilerConfig() to the callback",
    "hook": "pass profiler_config=mldbg.ProfilerConfig() to the hook",
    None: "pass profiler_config=mldbg.ProfilerConfig() to the hook or callback "
    "(under mldbg run: `profiler_config: {}` in a --hook-config file)",
}
INCLUDE_ADVICE = {
    "run": "name it in include_collections of a --hook-config file",
    "callback": "add it to the callback's include_collections",
    "hook": "add it to the hook's include_collections",
    None: "add it to include_collections (of the hook or callback; under mldbg run, of a --hook-config file)",
}


@dataclass(frozen=True)
class Skip:
    """One rule that reached no verdict: its `kind` (`framework`: reads what only another
    framework records, left out; `profiler`: no profiler data; `model`: the model has no such
    part; `short`: too little data to judge; `data`: the data it reads was not recorded),
    `why` (the true reason) and `advice` (what to do, for how the run was recorded; may be "")."""

    rule: str
    kind: str
    why: str
    advice: str = ""

    def __str__(self) -> str:
        return f"{self.rule}: {self.why}" + (f"; {self.advice}" if self.advice else "")


def recorded_with_statistics(trial: Any) -> bool:
    """Was the run recorded with the two lines' statistics (a hook with no collections named)?
    Then every collection the model allows was recorded, and include_collections is no help."""
    try:
        from mldbg.rules.view import TrialView

        columns = TrialView(trial).columns
        for name in sorted(trial.tensor_names(collection="weights"))[:3]:
            found = columns.tensor(name)
            if found is not None and found.has_statistics:
                return True
    except Exception:  # a damaged or empty run: no statistics to speak of
        return False
    return False


def explain(
    skipped: Mapping[str, str],
    rules: Iterable[Any],
    trial: Any,
    how: str | None = None,
    unchecked: Mapping[str, str] | None = None,
    complete: bool | None = None,
) -> list[Skip]:
    """Each skipped rule of `skipped` (name -> the runner's reason) with its kind, true reason
    and advice. `how` is how the run was recorded: "run" (`mldbg run`), "callback", "hook", or
    None when it is not known (a run read from disk: the advice names each way);
    `complete` whether every collection the model allows was asked for (`mldbg run` without a
    hook config naming collections, a hook with the two lines' statistics); None reads it from
    the run (the statistics are there or not)."""
    by_name = {getattr(r, "name", str(r)): r for r in rules}
    unchecked = unchecked or {}
    try:
        have = {c for c, names in trial.collections().items() if names}
    except Exception:
        have = set()
    statistics = recorded_with_statistics(trial)
    complete = statistics if complete is None else complete
    functional = "loss" in trial_names(trial, "losses")  # the loss of a function, or the model's
    out = []
    for name, why in skipped.items():
        rule = by_name.get(name)
        needs = tuple(rule.needed_collections()) if rule is not None else ()
        missing = [c for c in needs if c not in have]
        if getattr(rule, "needs_any", False) and len(missing) < len(needs):
            missing = []  # it read what it had: the reason is the rule's own
        skip = _one(name, why, needs, missing, name in unchecked, complete, how)
        if skip.kind == "data" and not statistics and functional and {"labels", "predictions"} & set(missing):
            skip = Skip(name, "data", FUNCTIONAL_LABELS, FUNCTIONAL_ADVICE[how])
        out.append(skip)
    return out


FUNCTIONAL_LABELS = (
    "no predictions or labels were recorded: the loss is computed by a function (F.cross_entropy) "
    "or inside the model, and its predictions and labels are read only at the hook's statistics steps, "
    "which this run did not record"
)
FUNCTIONAL_ADVICE = {
    "run": "a --hook-config file with `statistics: true` records them",
    "callback": "leave the callback's collections and save_config unset to have them",
    "hook": "leave the hook's include_collections and save_config unset to have them",
    None: "record with the hook's statistics to have them (a hook or callback with no collections "
    "named; under mldbg run, `statistics: true` in a --hook-config file)",
}


def trial_names(trial: Any, collection: str) -> set[str]:
    try:
        return set(trial.tensor_names(collection=collection))
    except Exception:
        return set()


def _one(name: str, why: str, needs: tuple[str, ...], missing: list[str], short: bool,
         complete: bool, style: str | None) -> Skip:  # fmt: skip
    if short or not missing:
        if PROFILER_MARK in why:
            return Skip(name, "profiler", "no profiler data in this run", PROFILER_ADVICE[style])
        return Skip(name, "short" if short else "data", why)
    if all(c in OTHER_FRAMEWORK for c in missing):
        frameworks = sorted({OTHER_FRAMEWORK[c] for c in missing})
        return Skip(name, "framework", f"reads only what {' and '.join(frameworks)} records")
    model = [c for c in missing if c in MODEL_PARTS]
    if model and len(model) == len(missing):
        reason = "; ".join(MODEL_PARTS[c] for c in model)
        advice = "; ".join(MODEL_ADVICE[c] for c in model if c in MODEL_ADVICE)
        if not complete:  # the hook was told its collections: they may have left it out
            reason += f", or the hook's collections left {' and '.join(model)} out"
            advice = "; ".join(filter(None, [advice, INCLUDE_ADVICE[style]]))
        return Skip(name, "model", reason, advice)
    parts = [DATA_PARTS.get(c, f"no {c} were recorded") for c in missing]
    advice = "" if complete else INCLUDE_ADVICE[style]
    return Skip(name, "data", "; ".join(parts), advice)


GROUPS = (  # kind -> how the summary names the group
    ("model", "not in this training"),
    ("data", "no data for them"),
    ("short", "too little data to judge"),
)


def summary(
    skips: list[Skip], ran: int, fired: int, findings: int, where: str = "", hint: str = "--verbose"
) -> str:
    """One line: how many rules ran (over `where`) and what they found, then the rules that
    could not judge, grouped by why (the profiler rules counted as one group), with where to
    read each reason (`hint`). Rules of other frameworks are not counted."""
    where = f" {where}" if where else ""
    if not ran:
        head = f"no rule ran{where}"
    elif not findings:
        head = f"{ran} rule{'s' if ran != 1 else ''} ran{where}, none fired"
    else:
        s = "s" if findings != 1 else ""
        head = f"{ran} rules ran{where}, {fired} fired ({findings} finding{s})"
    shown = counted(skips)
    if not shown:
        return head
    parts = []
    for kind, label in GROUPS:
        names = sorted(s.rule for s in shown if s.kind == kind)
        if names:
            parts.append(f"{label}: {', '.join(names)}")
    profiler = [s for s in shown if s.kind == "profiler"]
    if profiler:
        parts.append(f"{len(profiler)} profiler rule{'s' if len(profiler) != 1 else ''}: no profiler data")
    return f"{head}; {len(shown)} could not judge this run ({'; '.join(parts)}): {hint} says why"


def reasons(skips: list[Skip]) -> list[str]:
    """One line per skipped rule, "NAME skipped: why; advice" (or "could not judge"), the
    profiler rules that lack profiler data as one line; rules of other frameworks left out."""
    lines = []
    shown = counted(skips)
    profiler = [s for s in shown if s.kind == "profiler"]
    for skip in shown:
        if skip.kind == "profiler":
            if skip is profiler[0]:
                names = ", ".join(s.rule for s in profiler)
                lines.append(f"{len(profiler)} profiler rules ({names}) skipped: {skip.why}; {skip.advice}")
            continue
        verb = "could not judge" if skip.kind == "short" else "skipped"
        lines.append(f"{skip.rule} {verb}: {skip.why}" + (f"; {skip.advice}" if skip.advice else ""))
    return lines


def counted(skips: list[Skip]) -> list[Skip]:
    """The skips worth saying: all but the rules of another framework."""
    return [s for s in skips if s.kind != "framework"]
