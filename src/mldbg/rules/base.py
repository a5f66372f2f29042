"""The extension point for rules: `Rule`, `Finding`, and the registry of built-in rules.

A rule is one small class. It declares its parameters as annotated class attributes (the
defaults of RULES.md), the collections it `needs`, and overrides `check(trial, step)`, which
the runner calls once per step, in order, as steps become available, with a `TrialView` of the
run. Its state (windows, counters) is declared in `reset()` and carries across calls, so the
same rule runs offline (`check`) and live (`watch`), and the runner resets it before a run, so
one rule object checks run after run. Results are values: `check` returns findings, it never
raises for a condition it detects.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from mldbg.rules.params import Range, checked, unknown_parameters

if typing.TYPE_CHECKING:
    from mldbg.rules.view import TrialView
    from mldbg.trial import Trial


SEVERITIES = ("error", "warning")


@dataclass
class Finding:
    """What a rule found: what is wrong (with numbers), where, and what to try."""

    rule: str
    step: int
    mode: str | None
    message: str
    tensors: list[str] = field(default_factory=list)
    suggestion: str = ""
    worker: str | None = None
    #: "error": a defect of the model, the data or the training; "warning": what depends on
    #: the machine (profiler findings). `mldbg check` fails on errors (on both with --strict).
    severity: str = "error"
    #: the batch to replay: one fingerprint per sample of the model's input at `step`, when
    #: the hook recorded them (`sample_fingerprints`); `mldbg.find_samples(dataset,
    #: finding.samples)` gives their indices in the data set.
    samples: list[int] = field(default_factory=list)
    #: how often a finding of this kind means a real defect (0-1), where the rule knows
    #: better than its own reliability (`mldbg.rules.diagnosis.causes.RELIABILITY`): the one
    #: of its tests that fired is surer or weaker than the rule's findings on the whole. None:
    #: the rule's.
    reliability: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("worker", "reliability"):
            if out[key] is None:
                del out[key]
        if not out["samples"]:
            del out["samples"]
        return out

    def _repr_html_(self) -> str:
        """The finding as a one-row table in a notebook (see `mldbg.trial.html`)."""
        from mldbg.trial.html import findings_html

        return findings_html([self])

    def __str__(self) -> str:
        where = f"step {self.step}" + (f" ({self.mode})" if self.mode else "")
        tag = self.rule if self.severity == "error" else f"{self.rule}, {self.severity}"
        text = f"[{tag}] {where}: {self.message}"
        return text + (f"\n    try: {self.suggestion}" if self.suggestion else "")


class Findings(list[Finding]):
    """What `mldbg.check` returns: a list of findings that shows as a table in a notebook."""

    def _repr_html_(self) -> str:
        from mldbg.trial.html import findings_html

        return findings_html(self)


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class Rule:
    """Base of every rule. Subclass, annotate parameters with defaults, override `check`.

    ```
    @register
    class VanishingGradient(Rule):
        \"\"\"Mean |gradient| below `threshold`: the layers below stop learning.\"\"\"
        needs = ("gradients",)
        threshold: float = 1e-7

        def reset(self):
            super().reset()
            self._streak: dict[str, int] = {}   # the rule's state, declared here

        def check(self, trial: TrialView, step: int) -> Finding | None:
            ...
            return self.finding(trial, step, "...", tensors=[...], suggestion="...")
    ```
    """

    name: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()  # collections; the runner skips the rule when absent
    needs_any: ClassVar[bool] = False  # True: one of `needs` is enough
    default: ClassVar[bool] = True  # part of the default set run by `mldbg check`
    needs_steps: ClassVar[bool] = True  # False: runs on a run with no saved tensor step yet
    # collection -> statistics read of its tensors (`TrialView.statistic`); raw tensors do too
    reads: ClassVar[dict[str, tuple[str, ...]]] = {}
    suggestion: ClassVar[str] = ""
    #: the severity of its findings: "error" (the model, data or training is at fault) or
    #: "warning" (it depends on the machine: the profiler rules)
    severity: ClassVar[str] = "error"
    #: the root cause its findings are evidence for (a cause of `mldbg.rules.diagnosis`, such as
    #: "learning_rate_too_high", or a new name): `mldbg.diagnose` groups them under it. Empty:
    #: the diagnosis catalogue decides, and a rule it does not know is its own cause.
    cause: ClassVar[str] = ""
    #: parameter -> `Range` of allowed values, where the tables of `mldbg.rules.params`
    #: (keyed by parameter name: `num_steps` >= 1, `*_percent` in 0..100) do not say it
    bounds: ClassVar[dict[str, Range]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            cls.name = snake_case(cls.__name__)
        if cls.severity not in SEVERITIES:
            raise TypeError(f"rule {cls.__name__}: severity {cls.severity!r} is not one of {SEVERITIES}")

    def __init__(self, base_trial: Trial | None = None, **params: Any):
        self.trial = base_trial
        # smdebug compatibility: `action_str` (actions live elsewhere in mldbg) and
        # `other_trials` (kept as an attribute unless the rule declares it) are accepted
        params.pop("action_str", None)
        if "other_trials" in params and "other_trials" not in self._types():
            self.other_trials = params.pop("other_trials")
        allowed = self.parameters()
        unknown = set(params) - set(allowed)
        if unknown:
            raise unknown_parameters(self.name, unknown, allowed)
        types = self._types()
        for key, value in params.items():
            setattr(self, key, checked(type(self), key, value, types[key]))
        self.reset()

    @property
    def base_trial(self) -> Trial | None:
        """smdebug's name for the trial a rule reads."""
        return self.trial

    @base_trial.setter
    def base_trial(self, trial: Trial | None) -> None:
        self.trial = trial

    # parameters ---------------------------------------------------------------------------
    @classmethod
    def _types(cls) -> dict[str, Any]:
        found = cls.__dict__.get("_parameter_types")  # resolved once per class: a rule is made per run
        if found is None:
            hints: dict[str, Any] = {}
            for klass in reversed(cls.__mro__):
                if klass is object or klass is Rule.__mro__[-1]:
                    continue
                hints.update(typing.get_type_hints(klass))
            found = {
                k: v
                for k, v in hints.items()
                if typing.get_origin(v) is not ClassVar and not k.startswith("_") and k not in ("trial",)
            }
            type.__setattr__(cls, "_parameter_types", found)
        return dict(found)

    @classmethod
    def parameters(cls) -> dict[str, Any]:
        """Parameter name -> default."""
        return {k: getattr(cls, k, None) for k in cls._types()}

    def params(self) -> dict[str, Any]:
        """This instance's parameter values."""
        return {k: getattr(self, k) for k in self._types()}

    def reset(self) -> None:
        """Return the rule's state (windows, counters, what it reported) to its start.

        Called when the rule is made and by the runner before it reads a run, so one rule
        object can check run after run. A rule with state overrides it, calls
        `super().reset()` and assigns every state attribute here: this is where a rule's
        state is declared.
        """
        self._fired: set[Any] = set()

    # the work -----------------------------------------------------------------------------
    def needed_collections(self) -> tuple[str, ...]:
        """The collections this rule reads (its parameters may change them); see `needs_any`."""
        return tuple(self.needs)

    def check(self, trial: TrialView, step: int) -> Finding | Iterable[Finding] | None:
        """Look at one step (global step number); return what is wrong, or None.

        smdebug-style rules define `invoke_at_step(step) -> bool` instead: True is a finding.
        """
        invoke = getattr(self, "invoke_at_step", None)
        if invoke is None:
            raise NotImplementedError(f"rule {self.name!r} defines neither check() nor invoke_at_step()")
        if invoke(step):
            return self.finding(trial, step, f"{type(self).__name__}: condition met at step {step}")
        return None

    def finish(self, trial: TrialView) -> Finding | Iterable[Finding] | None:
        """Called once after the last step of a finished run (for whole-run conditions)."""
        return None

    def poll(self, trial: TrialView, now: float) -> Finding | Iterable[Finding] | None:
        """Called on every pass of a live runner, new steps or not (for wall-clock rules)."""
        return None

    def unchecked(self) -> str | None:
        """After `finish`: why the rule could not look at anything, or None if it did."""
        return None

    def undecided(self) -> str | None:
        """After `finish`: why the rule, which found some of its data, had too little to
        judge, with counts ("needs 50 saved losses, has 3"), or None. Never silent: the
        runner lists it (`RuleRunner.unchecked`) and `mldbg check` prints it."""
        return None

    def needed_statistics(self) -> dict[str, tuple[str, ...]]:
        """Collection -> the statistics (`mldbg.store.statistics` keys) this rule reads of its
        tensors, for the docs and the hook: `reads`, unless the parameters change them (a
        saturation rule's bounds)."""
        return dict(self.reads)

    def first(self, key: Any = None) -> bool:
        """True the first time `key` is seen: report a condition once, not at every step."""
        if key in self._fired:
            return False
        self._fired.add(key)
        return True

    def finding(
        self,
        trial: Trial | TrialView | None,
        step: int,
        message: str,
        tensors: Iterable[str] = (),
        suggestion: str | None = None,
        worker: str | None = None,
        samples: Iterable[int] = (),
        reliability: float | None = None,
    ) -> Finding:
        mode = None
        if trial is not None:
            try:
                mode = trial.mode(step).name
            except Exception:
                mode = None
        return Finding(
            rule=self.name,
            step=step,
            mode=mode,
            message=message,
            tensors=list(tensors),
            suggestion=self.suggestion if suggestion is None else suggestion,
            worker=worker,
            severity=self.severity,
            samples=[int(s) for s in samples],
            reliability=reliability,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"


BUILTIN: dict[str, type[Rule]] = {}


def register(cls: type[Rule]) -> type[Rule]:
    """Class decorator: add a built-in rule to `BUILTIN` under its snake_case name."""
    if not cls.__doc__:
        raise TypeError(f"rule {cls.__name__} needs a docstring: it is shown to users")
    BUILTIN[cls.name] = cls
    return cls
