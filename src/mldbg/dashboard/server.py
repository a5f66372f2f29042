"""The dashboard's HTTP protocol: uvicorn's h11 protocol with a bound on the request head.

uvicorn bounds the wait between requests on a kept-alive connection (`timeout_keep_alive`),
not the time a client takes to send a request head: a connection that sends half a head and
then nothing (slowloris) stays open for good, and a few thousand of them exhaust the server's
file descriptors. Here every request head must be complete within `HEAD_SECONDS` of its first
byte (or of the connection, for the first request), or the connection is closed."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_SECONDS = 10.0  # a browser sends its head in one packet; a client on a slow link in well under this


def head_seconds() -> float:
    """`HEAD_SECONDS`, or `MLDBG_DASHBOARD_HEAD_SECONDS` when set (tests, slow links)."""
    try:
        value = float(os.environ.get("MLDBG_DASHBOARD_HEAD_SECONDS", HEAD_SECONDS))
    except ValueError:
        return HEAD_SECONDS
    return value if value > 0 else HEAD_SECONDS


class HeadTimeoutProtocol(H11Protocol):
    """H11Protocol that closes a connection whose request head is not complete in time."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_of: Any = None
        self._start_head_timer()

    def _start_head_timer(self) -> None:
        if self._head_timer is None:
            self._head_of = self.cycle  # the head is complete once another cycle starts
            self._head_timer = self.loop.call_later(head_seconds(), self._head_too_slow)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self.cycle is self._head_of and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        between = self.cycle is None or self.cycle.response_complete
        if between:  # bytes of a new request's head (the first, or one after a keep-alive wait)
            self._start_head_timer()
        super().data_received(data)
        if self.cycle is not self._head_of:
            self._stop_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        super().connection_lost(exc)
