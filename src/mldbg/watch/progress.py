"""Live progress of a watcher: a status line on a terminal, plain lines otherwise.

The status says the last step checked, steps per second, how many rules are evaluated (and
how many were skipped for missing data) and the findings so far. Notes (findings, skipped
files) print above the status line without breaking it.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from typing import IO, Any

RATE_WINDOW = 10.0  # seconds of history behind the steps/s figure


class Progress:
    """`interactive=None` decides by whether `stream` is a terminal. Plain lines come every
    `interval` seconds while something changes, and once at the end."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        interactive: bool | None = None,
        interval: float = 5.0,
        label: str = "mldbg watch",
    ):
        self.stream = stream if stream is not None else sys.stderr
        if interactive is None:
            interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interactive = interactive
        self.interval = interval
        self.label = label
        self._bar: Any = None
        self._times: deque[tuple[float, int]] = deque(maxlen=200)
        self._last_line = 0.0
        self._last_text = ""
        self.status = ""

    def _rate(self, checked: int) -> float:
        """Steps per second over the last `RATE_WINDOW` seconds (from the first step checked)."""
        now = time.monotonic()
        if checked and (not self._times or self._times[-1][1] != checked):
            self._times.append((now, checked))
        while len(self._times) > 2 and now - self._times[0][0] > RATE_WINDOW:
            self._times.popleft()
        if len(self._times) < 2:
            return 0.0
        (t0, n0), (t1, n1) = self._times[0], self._times[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else 0.0

    def update(
        self,
        step: int | None,
        steps_checked: int,
        rules: int,
        skipped: int,
        findings: int,
        waiting: str | None = None,
    ) -> None:
        rate = self._rate(steps_checked)
        if waiting:
            text = waiting
        else:
            rule_text = f"{rules} rule{'s' if rules != 1 else ''}" + (
                f" ({skipped} skipped)" if skipped else ""
            )
            text = (
                f"step {'-' if step is None else step} | {steps_checked} checked | {rate:.1f} steps/s | "
                f"{rule_text} | {findings} finding{'s' if findings != 1 else ''}"
            )
        self.status = text
        if self.interactive:
            bar = self._ensure_bar()
            if text != self._last_text:
                bar.set_description_str(f"{self.label}: {text}", refresh=True)
        else:
            now = time.monotonic()
            if text != self._last_text and now - self._last_line >= self.interval:
                self._line(text)
                self._last_line = now
        self._last_text = text

    def note(self, text: str) -> None:
        """A message line (a finding, a skipped file) that stays above the status line."""
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def close(self, final: str | None = None) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        text = final or self.status
        if text:
            self._line(text)

    def _line(self, text: str) -> None:
        print(f"{self.label}: {text}", file=self.stream, flush=True)

    def _ensure_bar(self) -> Any:
        if self._bar is None:
            from tqdm import tqdm

            try:  # a terminal that reports no size (a bare pty) gets a fixed width
                size = os.get_terminal_size(self.stream.fileno())
                sized = size.columns > 0 and size.lines > 0
            except (OSError, ValueError, AttributeError):
                sized = False
            self._bar = tqdm(
                file=self.stream,
                bar_format="{desc}",
                dynamic_ncols=sized,
                ncols=None if sized else 120,
                nrows=None if sized else 24,
                leave=False,
                mininterval=0.2,
            )
        return self._bar


class NoProgress(Progress):
    """Silent, except for notes (findings and problems still print)."""

    def __init__(self, stream: IO[str] | None = None, label: str = "mldbg watch"):
        super().__init__(stream, interactive=False, interval=float("inf"), label=label)

    def update(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self, final: str | None = None) -> None:
        pass
