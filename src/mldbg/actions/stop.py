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
    It fires once per run, on the first finding of any of its `rules`.
    """

    def __init__(
        self,
        *,
        signal: str | int | None = None,
        pid: int | None = None,
        rules: Iterable[str] | None = None,
        **gate: Any,
    ):
        gate.setdefault("once_per_rule", True)
        super().__init__(rules=rules, **gate)
        self.signal = None if signal is None else _signal_number(signal)
        self.pid = pid

    def key(self, finding: Finding) -> str:
        return "stop"  # one stop per run, whatever fired

    def describe(self) -> str:
        sig = "" if self.signal is None else f" {signals.Signals(self.signal).name}"
        return f"StopTraining{sig}"

    def act(self, findings: list[Finding], context: Context) -> None:
        if context.ended:
            return  # found in the final pass: the training is over, nothing to stop
        first = findings[0]
        reason = f"{first.rule} at step {first.step}: {first.message}"
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
