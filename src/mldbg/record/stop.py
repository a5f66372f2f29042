"""Stop requests: how a watcher's `StopTraining` reaches the training loop (FORMAT.md).

A job of one worker stops at the first step end after it sees `control/stop`. The workers of
a distributed job must stop at the same step, or those still running wait forever in their
next collective (an all-reduce of gradients) for the ones that left. So worker 0 picks the
step, far enough ahead that every worker reads it before getting there, and writes it to
`control/stop_at`; each worker runs on to the end of that step and stops there.
"""

from __future__ import annotations

import logging
import math
import time

from mldbg.errors import CorruptRecord
from mldbg.store import Store, layout, markers
from mldbg.store.markers import StopAt, StopRequest

log = logging.getLogger("mldbg")

WAIT_FOR_STEP_SECONDS = 30.0  # a worker that sees a request but no agreed step stops after this
MAX_MARGIN = 100_000


class StopRequests:
    """Looks for a stop request at step ends (every `check_seconds`; 0: every step) and says
    when to stop. `started` (unix time): requests older than it were left by an earlier run."""

    def __init__(self, store: Store, rank: int, world_size: int, check_seconds: float, started: float):
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.check_seconds = check_seconds
        self.started = started
        self._next_check = 0.0
        self._stale_checked = False  # until then, a stale request is removed when seen
        self._stop_at: int | None = None  # the agreed step (distributed jobs)
        self._reason = ""
        self._waiting_since: float | None = None
        self._last_end: float | None = None
        self._step_seconds: float | None = None  # recent step time, to place the agreed step
        self._warned_damaged = False

    def check(self, finished: int) -> str | None:
        """Called when step `finished` ended: the reason to stop now, or None to go on."""
        now = time.monotonic()
        if self.world_size > 1:  # the pace places the agreed step; one worker needs none
            if self._last_end is not None:
                took = now - self._last_end
                self._step_seconds = (
                    took if self._step_seconds is None else 0.8 * self._step_seconds + 0.2 * took
                )
            self._last_end = now
        if self._stop_at is not None:
            return self._reason if finished >= self._stop_at else None
        if now < self._next_check:
            return None
        self._next_check = now + self.check_seconds
        request = self._request()
        if request is None:
            return None
        reason = request.reason or "a rule fired"
        if self.world_size <= 1:
            return reason
        stop_at = self._agreed_step(request, finished, now)
        if stop_at is None:
            return None
        self._stop_at, self._reason = stop_at, reason
        if finished > stop_at:
            log.warning(
                "mldbg: worker %d saw the agreed stop step %d only at step %d: the workers may stop "
                "at different steps", self.rank, stop_at, finished,
            )  # fmt: skip
        return reason if finished >= stop_at else None

    def clear_stale(self) -> None:
        """A request older than this run was meant for an earlier run here: remove it. If the
        store cannot tell now (a bucket away), `check` removes it once it can, and ignores it
        until then (it predates `started`)."""
        try:
            found = self.store.exists(layout.STOP_REQUEST)
        except Exception as e:
            log.debug("mldbg: stop request in %s not checked yet: %s", self.store.url, e)
            return
        self._stale_checked = True
        if found:
            request = self._read_request()
            if request is not None and (request.requested or 0) < self.started:
                self._remove_stale()

    # internals ------------------------------------------------------------------------------
    def _request(self) -> StopRequest | None:
        """The stop request meant for this run, if there is one."""
        try:
            if not self.store.exists(layout.STOP_REQUEST):
                return None
        except Exception:  # an unreachable store must not stop training
            return None
        request = self._read_request()
        if request is None:
            return None
        if request.requested is not None and request.requested < self.started:
            if not self._stale_checked:  # the bucket was away at the start
                self._stale_checked = True
                self._remove_stale()
            return None  # left over from an earlier run in the same place
        return request

    def _agreed_step(self, request: StopRequest, finished: int, now: float) -> int | None:
        """Worker 0 picks the step and writes it; the others read it (None: not there yet)."""
        if self.rank == 0:
            stop_at = finished + self._margin()
            try:
                markers.save(self.store, layout.STOP_AT, StopAt(stop_at, request.requested, self.rank))
            except Exception as e:
                log.warning("mldbg: cannot tell the other workers where to stop (%s): stopping now", e)
                return finished
            return stop_at
        try:
            agreed = markers.load(self.store, layout.STOP_AT, StopAt)
        except Exception:  # damaged, or the store is away: not there yet, look again
            agreed = None
        if agreed is not None and agreed.request == request.requested:
            return agreed.step
        self._next_check = now  # look again at the next step end
        if self._waiting_since is None:
            self._waiting_since = now
        elif now - self._waiting_since > WAIT_FOR_STEP_SECONDS:
            log.warning(
                "mldbg: worker %d: no stop step from worker 0 in %.0f s: stopping now",
                self.rank, WAIT_FOR_STEP_SECONDS,
            )  # fmt: skip
            return finished
        return None

    def _margin(self) -> int:
        """Steps ahead for the agreed stop: every other worker checks within `check_seconds` of
        a step end (plus a round trip on a remote store), and in a synchronous job runs at most
        one step ahead or behind worker 0."""
        horizon = 2 * self.check_seconds + (0.5 if self.store.remote else 0.0)
        step = self._step_seconds or 1.0
        return min(MAX_MARGIN, 2 + math.ceil(horizon / max(step, 1e-6)))

    def _remove_stale(self) -> None:
        try:
            self.store.delete(layout.STOP_REQUEST)
        except Exception as e:
            log.warning("mldbg: cannot remove an old stop request from %s: %s", self.store.url, e)

    def _read_request(self) -> StopRequest | None:
        """The request in the store. A damaged one still asks to stop (it has no time, so it is
        taken for this run's; at the start, for an earlier run's, and removed); one that cannot
        be read now (the store is away) is looked for again at the next check."""
        try:
            return markers.load(self.store, layout.STOP_REQUEST, StopRequest)
        except CorruptRecord as e:
            if not self._warned_damaged:
                self._warned_damaged = True
                log.warning("mldbg: %s: taken as a stop request", e)
            return StopRequest(reason=f"a damaged stop request ({e})")
        except Exception as e:
            log.debug("mldbg: stop request in %s not read: %s", self.store.url, e)
            return None
