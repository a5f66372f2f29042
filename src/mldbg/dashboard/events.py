"""The dashboard's event log: what the refresher saw change, for `GET /api/events` (SSE).

The refresher thread publishes (a run appeared, a run recorded steps, a status changed, a rule
fired); each event gets a sequence number, and a reader asks for the events after the last
one it sent. A bounded buffer: a reader too far behind starts again from a fresh `hello`.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from typing import Any

MAX_EVENTS = 10_000


class EventLog:
    """Numbered events, newest last; safe to publish from one thread and read from others."""

    def __init__(self, size: int = MAX_EVENTS):
        self._lock = threading.Lock()
        self._events: deque[tuple[int, str, Any]] = deque(maxlen=size)
        self.seq = 0  # the number of the last event published

    def publish(self, name: str, data: Any) -> int:
        with self._lock:
            self.seq += 1
            self._events.append((self.seq, name, data))
            return self.seq

    def since(self, seq: int) -> list[tuple[int, str, Any]] | None:
        """The events after `seq`, oldest first; None when some of them were dropped already."""
        with self._lock:
            if seq >= self.seq:
                return []
            if not self._events or self._events[0][0] > seq + 1:
                return None
            first = seq + 1 - self._events[0][0]
            return [self._events[i] for i in range(first, len(self._events))]


def sse(name: str, data: Any, seq: int | None = None) -> str:
    """One server-sent event: `event:`, `id:` and a one-line JSON `data:`."""
    head = f"event: {name}\n" + (f"id: {seq}\n" if seq is not None else "")
    return head + "data: " + json.dumps(data, separators=(",", ":"), allow_nan=False) + "\n\n"
