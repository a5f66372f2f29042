"""Diagnoses: a run's findings judged as causes, one diagnosis per root cause.

A buggy run makes several rules fire, each with its own advice: a learning rate far too high
makes the loss jump, the ReLUs die, the gradients vanish and the updates stall, and each of
those rules would send the user elsewhere. `diagnose` groups the findings into the causes of
the catalogue (`causes.CAUSES`), most fundamental first: a cause whose evidence is there takes
the symptoms it explains, and its one advice replaces theirs. How:

1. In the catalogue's order, a cause is present when a finding not yet taken is its direct
   evidence (`Cause.evidence`, narrowed by facts of the run: `facts.RunFacts`), or when the
   run's facts speak for it (`Cause.signal`: the loss jumped 270x at the first steps) and a
   finding it explains is there. It takes every finding not yet taken that it explains.
2. Each finding left over goes to its rule's own cause (`causes.HOME`, or a rule's `cause`
   attribute, else the rule's name), which takes, in the same order, what it explains.
3. No two diagnoses may advise the opposite (lower and raise the learning rate, stop earlier
   and train longer): the later cause joins the earlier one.

Confidence (0-1) combines the evidence: a direct finding weighs its rule's reliability
(`causes.RELIABILITY`), a symptom a third of it, a fact its strength; the strongest counts
whole and each further one half, so agreeing evidence raises it and no single weak rule makes
it high. Facts choose the cause but do not make weak findings strong: the confidence stays
within `FACT_MARGIN` (0.1) of what the findings alone give. `why` says what it rests on. Severity is "error" when a finding of it is one.

A diagnosis is reported (an alert: what `mldbg.check` returns, what `mldbg check` prints and
exits 1 on) when its evidence reaches `REPORT_CONFIDENCE`: its findings' reliabilities
combined as above, each counted as direct evidence, or its confidence (facts of the run that
corroborate them: a loss that jumped 270x). One finding of a rule whose
lone findings have been wrong more often than right on trainings it was not tuned on
(reliability below the bar: `poor_weight_initialization`'s gradient-spread and gain tests,
`nlp_sequence_ratio`, `gradient_norm_spike`...) is a suspicion, not an alert: it needs a second
finding of the same cause to corroborate it. Nothing is lost: the suspicions are
`Diagnoses.unconfirmed`, listed apart by `mldbg check`, and a finding no cause claims is a
diagnosis of its own.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mldbg.rules.base import BUILTIN, Finding, Rule
from mldbg.rules.diagnosis.causes import (
    BY_NAME,
    CAUSES,
    HOME,
    OPPOSITE,
    SYMPTOM_WEIGHT,
    Cause,
    finding_reliability,
)
from mldbg.rules.diagnosis.facts import Fact, RunFacts
from mldbg.rules.specs import chosen_rules

#: the confidence from which a stop action acts on an error diagnosis (`StopTraining`)
STOP_CONFIDENCE = 0.75
#: how far facts of the run may raise a diagnosis's confidence above its findings' own
FACT_MARGIN = 0.1
#: the evidence (its findings' reliabilities combined) or confidence (with the facts of the
#: run) from which a diagnosis is reported. On the first looks at the five blind sets of issue
#: 26 (307 healthy, 92 buggy runs, `benchmarks/results/calibration_first_looks.json`), the
#: diagnoses below it alarmed 15 healthy runs alone and caught no buggy run by an expected rule
#: that the diagnoses above it did not catch too.
REPORT_CONFIDENCE = 0.65

JSON_FINDING_KEYS = ("rule", "step", "mode", "message", "tensors", "suggestion", "severity")


@dataclass
class Diagnosis:
    """One root cause of a run's findings: what, from which step, how sure, what to do."""

    cause: str  # snake_case name (`learning_rate_too_high`)
    step: int  # the first step of its evidence
    confidence: float  # 0-1
    why: str  # what the confidence rests on
    findings: list[Finding] = field(default_factory=list)  # the findings it explains
    advice: str = ""  # one advice that fits all of them
    severity: str = "error"  # "error" when one of its findings is an error, else "warning"
    title: str = ""  # the cause in words ("the learning rate is too high")
    explanation: str = ""  # why the cause shows as its findings do
    # its findings' reliabilities combined, each as direct evidence, facts aside: reported
    # (an alert) from `REPORT_CONFIDENCE`, else a suspicion (`Diagnoses.unconfirmed`)
    evidence: float = 1.0

    @property
    def reported(self) -> bool:
        """Whether it is an alert, not a suspicion: its findings' evidence, or its confidence
        (facts of the run that corroborate them), reaches `REPORT_CONFIDENCE`."""
        return max(self.evidence, self.confidence) >= REPORT_CONFIDENCE

    @property
    def rules(self) -> list[str]:
        """The rules of its findings, in order of their first finding."""
        return list(dict.fromkeys(f.rule for f in self.findings))

    def to_dict(self) -> dict[str, Any]:
        """The diagnosis as JSON: its fields, each finding with the JSON fields of a finding."""
        return {
            "cause": self.cause,
            "title": self.title,
            "step": self.step,
            "confidence": self.confidence,
            "why": self.why,
            "severity": self.severity,
            "advice": self.advice,
            "findings": [_finding_json(f) for f in self.findings],
        }

    def __str__(self) -> str:
        tag = self.cause if self.severity == "error" else f"{self.cause}, {self.severity}"
        head = f"[{tag}] {self.title or self.cause} (from step {self.step}, confidence {self.confidence:.2f})"
        lines = [head]
        lines += [f"    why: {self.why}"] if self.why else []
        lines += [f"    advice: {self.advice}"] if self.advice else []
        lines.append(f"    evidence ({len(self.findings)} finding{'s' if len(self.findings) != 1 else ''}):")
        for f in self.findings:
            where = f"step {f.step}" + (f" ({f.mode})" if f.mode else "")
            worker = f"{f.worker}: " if f.worker else ""
            lines.append(f"      {worker}[{f.rule}] {where}: {f.message}")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        return diagnoses_html([self])


class Diagnoses(list[Diagnosis]):
    """What `mldbg.diagnose` returns: a list of diagnoses that shows as a table in a notebook.
    `unconfirmed` holds the suspicions: diagnoses whose evidence is below `REPORT_CONFIDENCE`
    (one finding of a rule that alone is wrong as often as right), not reported."""

    def __init__(self, reported: Iterable[Diagnosis] = (), unconfirmed: Iterable[Diagnosis] = ()) -> None:
        super().__init__(reported)
        self.unconfirmed: list[Diagnosis] = list(unconfirmed)

    def reported_of(self, findings: Iterable[Finding]) -> list[Finding]:
        """Those of `findings` (the ones grouped) that belong to a reported diagnosis, in their
        order: what `mldbg.check` returns of them."""
        kept = {id(f) for d in self for f in d.findings}
        return [f for f in findings if id(f) in kept]

    @property
    def findings(self) -> list[Finding]:
        """Every finding of every diagnosis (what `mldbg.check` returns), in step order."""
        return sorted((f for d in self for f in d.findings), key=lambda f: (f.step, f.rule))

    def _repr_html_(self) -> str:
        return diagnoses_html(self)


def diagnose(
    run: str | os.PathLike[str] | Any | Iterable[Finding],
    rules: Any = None,
    start_step: int | None = None,
    end_step: int | None = None,
    *,
    trial: Any = None,
    facts: RunFacts | None = None,
    per_worker: bool = False,
) -> Diagnoses:
    """The run judged as causes: one `Diagnosis` per root cause, most certain first.

    `run` is a recorded run (a path, `s3://...`, or a `Trial`): the rules run over it as in
    `mldbg.check(run, rules, start_step, end_step)`. Or it is findings already found (a list of
    `Finding`): they are grouped, with the facts of `trial` (a path or `Trial`) when given.
    """
    from mldbg.trial import Trial, create_trial

    if isinstance(run, (list, tuple)) or (not isinstance(run, (str, os.PathLike, Trial)) and _findings(run)):
        findings = list(run)
        if facts is None and trial is not None:
            facts = RunFacts.of(trial if isinstance(trial, Trial) else create_trial(trial))
        return group(findings, facts, causes_of=rule_causes(rules), chosen=chosen_rules(rules))
    from mldbg.rules.runner import run_rules

    opened = run if isinstance(run, Trial) else create_trial(run)  # type: ignore[arg-type]
    findings = run_rules(opened, rules, start_step=start_step, end_step=end_step, per_worker=per_worker)
    if facts is None:
        facts = RunFacts.of(opened) if findings else RunFacts()
    return group(findings, facts, causes_of=rule_causes(rules), chosen=chosen_rules(rules))


def reported(findings: Sequence[Finding], trial: Any, rules: Any = None) -> list[Finding]:
    """Of `findings` (the rules' over `trial`, a `Trial`), those of the reported diagnoses,
    in their order: what `mldbg.check` returns."""
    if not findings:
        return []
    grouped = group(findings, RunFacts.of(trial), causes_of=rule_causes(rules), chosen=chosen_rules(rules))
    return grouped.reported_of(findings)


def _findings(value: Any) -> bool:
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, Mapping))


def rule_causes(rules: Any) -> dict[str, str]:
    """Rule name -> the cause it declares (`Rule.cause`), for the rule objects and classes of
    `rules` and every built-in rule that declares one."""
    out = {name: cls.cause for name, cls in BUILTIN.items() if cls.cause}
    if rules is None or isinstance(rules, (str, Rule, type)):
        rules = [] if rules is None else [rules]
    for r in rules:
        cause = r.cause if isinstance(r, Rule) or (isinstance(r, type) and issubclass(r, Rule)) else ""
        if cause:
            out[r.name] = cause
    return out


def group(
    findings: Sequence[Finding],
    facts: RunFacts | None = None,
    *,
    causes_of: Mapping[str, str] | None = None,
    catalogue: Sequence[Cause] = CAUSES,
    chosen: Iterable[str] = (),
) -> Diagnoses:
    """Group `findings` into diagnoses (the steps of the module doc). `facts` are the run's
    (`RunFacts.of(trial)`); without them only the findings' rules, tensors and steps count.
    `causes_of` maps a rule to the cause it declares (a custom rule's `cause`). A diagnosis
    with a finding of a rule in `chosen` (named by the user: `specs.chosen_rules`) is
    reported whatever its evidence."""
    facts = facts or RunFacts()
    causes_of = dict(causes_of or {})
    order = {c.name: i for i, c in enumerate(catalogue)}
    by_name = {c.name: c for c in catalogue}
    left = sorted(findings, key=lambda f: (f.step, f.rule))
    taken: dict[str, list[tuple[Finding, bool]]] = {}  # cause -> (finding, direct evidence?)
    signals: dict[str, list[Fact]] = {}

    def take(cause: Cause, extra: Any = None) -> None:
        nonlocal left
        keep = []
        for f in left:
            home = causes_of.get(f.rule) or HOME.get(f.rule) or f.rule
            direct = cause.is_evidence(f, facts) or home == cause.name
            if direct or cause.claims(f, facts) or (extra is not None and extra(f)):
                taken.setdefault(cause.name, []).append((f, direct))
            else:
                keep.append(f)
        left = keep

    # 1. the catalogue's causes, in order: present on direct evidence or facts plus a symptom
    for cause in catalogue:
        declared = [f for f in left if causes_of.get(f.rule) == cause.name]
        direct = declared or [f for f in left if cause.is_evidence(f, facts)]
        facts_for = cause.signals(facts)
        if direct or (facts_for and any(cause.claims(f, facts) for f in left)):
            if facts_for:
                signals[cause.name] = facts_for
            take(cause, extra=lambda f, c=cause: causes_of.get(f.rule) == c.name)
    # 2. what is left: its rule's own cause, which takes what it explains
    while left:
        homes = {causes_of.get(f.rule) or HOME.get(f.rule) or f.rule for f in left}
        name = min(homes, key=lambda n: (order.get(n, len(order)), n))
        known = by_name.get(name)
        if known is None:  # a cause the catalogue does not know: the rule's own
            mine = [f for f in left if (causes_of.get(f.rule) or HOME.get(f.rule) or f.rule) == name]
            taken.setdefault(name, []).extend((f, True) for f in mine)
            left = [f for f in left if f not in mine]
            continue
        take(known, extra=lambda f, n=name: (causes_of.get(f.rule) or HOME.get(f.rule) or f.rule) == n)
    # 3. no two opposite advices: the later cause joins the earlier
    names = sorted(taken, key=lambda n: (order.get(n, len(order)), n))
    for i, later in enumerate(names):
        for earlier in names[:i]:
            if (
                earlier in taken
                and later in taken
                and _opposed(by_name.get(earlier), taken[earlier], by_name.get(later), taken[later])
            ):
                taken[earlier].extend((f, False) for f, _ in taken.pop(later))
                signals.setdefault(earlier, []).extend(signals.pop(later, []))
                break
    out = [
        _diagnosis(name, taken[name], signals.get(name, []), by_name.get(name))
        for name in names
        if name in taken
    ]
    out.sort(key=lambda d: (d.severity != "error", -d.confidence, d.step))
    picked = set(chosen)
    shown = [d for d in out if d.reported or any(f.rule in picked for f in d.findings)]
    return Diagnoses(shown, [d for d in out if all(d is not s for s in shown)])


def _opposed(
    a: Cause | None, a_found: list[tuple[Finding, bool]], b: Cause | None, b_found: list[tuple[Finding, bool]]
) -> bool:
    """Do the advices of two diagnoses (a cause and the findings it took) point opposite ways?"""
    if a is None or b is None:
        return False
    b_directions = b.directions_of({f.rule for f, _ in b_found})
    return any(OPPOSITE.get(d) in b_directions for d in a.directions_of({f.rule for f, _ in a_found}))


def _diagnosis(
    name: str, evidence: list[tuple[Finding, bool]], facts: list[Fact], cause: Cause | None
) -> Diagnosis:
    findings = sorted((f for f, _ in evidence), key=lambda f: (f.step, f.rule))
    direct: dict[str, float] = {}
    symptoms: dict[str, float] = {}
    for f, is_direct in evidence:
        w = finding_reliability(f)
        if is_direct:
            direct[f.rule] = max(direct.get(f.rule, 0.0), w)
        else:
            symptoms[f.rule] = max(symptoms.get(f.rule, 0.0), SYMPTOM_WEIGHT * w)
    for rule in direct:
        symptoms.pop(rule, None)
    # facts tell which cause; they do not make weak findings strong: the confidence stays
    # within FACT_MARGIN of what the findings alone would give, each counted as direct evidence
    own: dict[str, float] = {}  # rule -> its surest finding's reliability
    for f, _ in evidence:
        own[f.rule] = max(own.get(f.rule, 0.0), finding_reliability(f))
    alone = _combined(list(own.values()))
    weights = [*direct.values(), *symptoms.values(), *(f.strength for f in facts)]
    confidence = round(min(0.99, _combined(weights), alone + FACT_MARGIN), 2)
    parts = []
    if direct:
        parts.append(f"{_names(direct)} {'is' if len(direct) == 1 else 'are'} direct evidence")
    if symptoms:
        parts.append(
            f"{_names(symptoms)} {'is a symptom' if len(symptoms) == 1 else 'are symptoms'} it explains"
        )
    parts += [f.text for f in facts]
    if cause is None:
        advice = next((f.suggestion for f in findings if f.suggestion), "")
        title = name.replace("_", " ")
    else:
        advice, title = cause.advice, cause.title
    return Diagnosis(
        cause=name,
        step=min(f.step for f in findings),
        confidence=confidence,
        why="; ".join(parts) if parts else "",
        findings=findings,
        advice=advice,
        severity="error" if any(f.severity == "error" for f in findings) else "warning",
        title=title,
        explanation=cause.explanation if cause is not None else "",
        evidence=round(alone, 2),
    )


def _combined(weights: list[float]) -> float:
    """The strongest piece of evidence counts whole, each further one half."""
    if not weights:
        return 0.0
    ordered = sorted(weights, reverse=True)
    rest = 1.0 - ordered[0]
    for w in ordered[1:]:
        rest *= 1.0 - w / 2
    return 1.0 - rest


def _names(weights: dict[str, float]) -> str:
    names = list(weights)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _finding_json(f: Finding) -> dict[str, Any]:
    out = {k: getattr(f, k) for k in JSON_FINDING_KEYS}
    if f.worker:
        out["worker"] = f.worker
    return out


def diagnoses_html(diagnoses: Sequence[Diagnosis]) -> str:
    """Diagnoses as a table (cause, confidence, advice), each with its findings below it."""
    from html import escape

    from mldbg.trial.html import findings_html

    if not diagnoses:
        return '<div class="mldbg-diagnoses"><b>No diagnosis</b>: no rule fired.</div>'
    rows = []
    for d in diagnoses:
        rows.append(
            f'<div class="mldbg-diagnosis" style="margin:0.6em 0"><b>{escape(d.title or d.cause)}</b> '
            f"(<code>{escape(d.cause)}</code>, {escape(d.severity)}, from step {d.step}, confidence "
            f"{d.confidence:.2f})<br><i>{escape(d.why)}</i><br>advice: {escape(d.advice)}"
            f'<div style="margin-left:1.5em">{findings_html(d.findings)}</div></div>'
        )
    n = len(diagnoses)
    return f'<div class="mldbg-diagnoses"><b>{n} diagnos{"es" if n != 1 else "is"}</b>{"".join(rows)}</div>'


__all__ = [
    "BY_NAME",
    "CAUSES",
    "STOP_CONFIDENCE",
    "Cause",
    "Diagnoses",
    "Diagnosis",
    "RunFacts",
    "diagnose",
    "group",
    "rule_causes",
]
