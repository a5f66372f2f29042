"""StopTraining: ask the training job to stop at its next step boundary."""

from __future__ import annotations

import contextlib
import logging
import os
import signal as signals
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action
from mldbg.errors import CorruptRecord, InvalidConfig
from mldbg.store import layout, markers, open_store, process
from mldbg.store.markers import StopRequest, WorkerMeta

if TYPE_CHECKING:
    from mldbg.rules.base import Finding

log = logging.getLogger("mldbg")


@register_action(aliases=("stop",))
class StopTraining(Action):
    """Write a stop request into the run's store; the hook raises `TrainingStopped` at the
    next step boundary, after flushing and closing the run, so everything recorded stays
    readable.

    With `signal` (a name such as "SIGTERM", or a number) the action also signals `pid`, or,
    when `pid` is None, the training processes named in the run's worker metadata that
    run on this host: for a script that catches exceptions broadly and would not stop.
    A process named by the metadata is signalled only when it is proven to be the run's: its
    identity (start time) must be the one the training wrote beside its pid. A pid the OS
    reused, or a `meta.json` edited to name another process, is refused with a warning; the
    stop request still stops the training at its next step. (An explicit `pid` is the
    caller's choice and is signalled as given.)
    It fires once per run. What stops it (`on`):
    - "diagnosis" (the default): the findings so far (of its `rules`, if given) are grouped into
      diagnoses (`mldbg.diagnose`), and the training stops once one of them is an error with a
      confidence of at least `min_confidence` (`mldbg.rules.diagnosis.STOP_CONFIDENCE`, 0.75):
      a single NaN or a learning rate that made the loss jump stops it; a lone loss spike, an
      overfit warning or a warning of the machine (a profiler rule) does not. With
      `warnings=True` a warning diagnosis that confident stops it too.
    - "finding": the first finding of any of its `rules`, whatever it is (smdebug's behaviour).
    """

    def __init__(
        self,
        *,
        signal: str | int | None = None,
        pid: int | None = None,
        rules: Iterable[str] | None = None,
        on: str = "diagnosis",
        min_confidence: float | None = None,
        warnings: bool = False,
        **gate: Any,
    ):
        from mldbg.rules.diagnosis import STOP_CONFIDENCE

        gate.setdefault("once_per_rule", True)
        super().__init__(rules=rules, **gate)
        if on not in ("diagnosis", "finding"):
            raise InvalidConfig(f"StopTraining: on={on!r}; use 'diagnosis' (the default) or 'finding'")
        self.on = on
        self.min_confidence = STOP_CONFIDENCE if min_confidence is None else float(min_confidence)
        if not 0.0 <= self.min_confidence <= 1.0:
            raise InvalidConfig(f"StopTraining: min_confidence={min_confidence!r} is not between 0 and 1")
        self.warnings = warnings
        self.signal = None if signal is None else _signal_number(signal)
        self.pid = pid
        self._evidence: list[Finding] = []  # the findings so far (of `rules`), judged together
        self._known: set[tuple[Any, ...]] = set()
        self.diagnosis: Any = None  # the diagnosis it stopped on (on="diagnosis")

    def due(self, diagnosis: Any) -> bool:
        """Whether `diagnosis` stops the training: an error (or, with `warnings`, a warning)
        with a confidence of at least `min_confidence`."""
        return (
            diagnosis.severity == "error" or self.warnings
        ) and diagnosis.confidence >= self.min_confidence

    def __call__(self, findings: Iterable[Finding], context: Context, final: bool = False) -> int:
        if self.on == "finding":
            return super().__call__(findings, context, final)
        new = 0
        for f in findings:
            key = (f.rule, f.step, f.worker, f.message)
            if (self.rules is None or f.rule in self.rules) and key not in self._known:
                self._known.add(key)
                self._evidence.append(f)
                new += 1
        if self.diagnosis is None and new:
            from mldbg.rules.diagnosis import REPORT_CONFIDENCE, RunFacts, group

            facts = RunFacts.of(context.trial) if context.trial is not None else None
            grouped = group(self._evidence, facts)
            # a bar set below the reporting bar acts on suspicions too: the user chose it
            weak = grouped.unconfirmed if self.min_confidence < REPORT_CONFIDENCE else []
            self.diagnosis = next((d for d in [*grouped, *weak] if self.due(d)), None)
        if self.diagnosis is None:
            return 0
        return super().__call__(self.diagnosis.findings, context, final)

    def key(self, finding: Finding) -> str:
        """One key, "stop", for what stops the run (one stop per run); a finding that does
        not (not part of a diagnosis due to stop) has its own key, so that a restarted watcher,
        which takes the keys of the findings handed before as done, can still stop the run."""
        if self.on == "diagnosis" and (self.diagnosis is None or finding not in self.diagnosis.findings):
            return f"judged|{finding.rule}|{finding.step}|{finding.worker or ''}"
        return "stop"

    def describe(self) -> str:
        sig = "" if self.signal is None else f" {signals.Signals(self.signal).name}"
        from mldbg.rules.diagnosis import STOP_CONFIDENCE

        on = ""  # the default policy keeps the plain name (a watcher's saved place is keyed by it)
        if self.on != "diagnosis" or self.min_confidence != STOP_CONFIDENCE or self.warnings:
            on = f" on {self.on}"
            if self.on == "diagnosis":
                on += f" >= {self.min_confidence:g}" + (" with warnings" if self.warnings else "")
        return f"StopTraining{sig}{on}"

    def act(self, findings: list[Finding], context: Context) -> None:
        if context.ended:
            return  # found in the final pass: the training is over, nothing to stop
        first = findings[0]
        reason = f"{first.rule} at step {first.step}: {first.message}"
        d = self.diagnosis
        if d is not None:
            reason += f" (diagnosis: {d.cause}, confidence {d.confidence:.2f}: {d.title})"
        request = StopRequest(
            reason=reason,
            rule=first.rule,
            step=first.step,
            findings=tuple(f.to_dict() for f in findings),
            requested=time.time(),
            by=f"mldbg watch (pid {os.getpid()} on {socket.gethostname()})",
        )
        store = context.store or open_store(context.run)
        markers.save(store, layout.STOP_REQUEST, request)
        context.stop_requested = reason
        log.info("mldbg: asked the training to stop: %s", reason)
        if self.signal is None:
            return
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # it already ended
                os.kill(self.pid, self.signal)
            return
        for key, meta in _training_processes(store):
            self._signal_training(store, key, meta)

    def _signal_training(self, store: Any, key: str, meta: WorkerMeta) -> None:
        """Signal the process `meta` names only once it is proven to be the training: the
        same identity (start time) and, on a local disk, holding the run's meta.json open."""
        assert meta.pid is not None and self.signal is not None
        pid, where = meta.pid, f"{store.url}/{key}"
        if meta.process and process.signal_process(
            pid, meta.process, self.signal, proof=lambda: process.proves_training(pid, store, key)
        ):
            log.info("mldbg: sent %s to the training process %d", signals.Signals(self.signal).name, pid)
            return
        live = process.identity(pid)
        if meta.process and live is None:
            return  # it ended meanwhile: nothing to stop
        if not meta.process:
            why = "no process identity was written beside it (a run of an older mldbg), so it is not proven to be the training"
        elif live != meta.process:
            why = (
                "its start time is not the training's: the pid was reused, or the file names another process"
            )
        else:
            why = process.why_not_proven(store, key)
        log.warning(
            "mldbg: did not signal pid %d named in %s: %s; the stop request still stops the training at its next step",
            pid, where, why,
        )  # fmt: skip


def _signal_number(value: str | int) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    name = str(value).upper()
    name = name if name.startswith("SIG") else f"SIG{name}"
    try:
        return int(signals.Signals[name])
    except KeyError:
        raise InvalidConfig(f"StopTraining: unknown signal {value!r}; use e.g. SIGTERM or SIGINT") from None


def _training_processes(store: Any) -> list[tuple[str, WorkerMeta]]:
    """The metadata (and its key) of the run's workers that run on this host and have not
    ended."""
    host, found = socket.gethostname(), []
    for worker in store.children(layout.WORKERS):
        if store.exists(layout.end_key(worker)):
            continue
        key = layout.meta_key(worker)
        try:
            meta = markers.load(store, key, WorkerMeta)
        except CorruptRecord:  # a damaged meta names no process to signal
            continue
        if meta is not None and meta.host == host and isinstance(meta.pid, int) and meta.pid != os.getpid():
            found.append((key, meta))
    return found
