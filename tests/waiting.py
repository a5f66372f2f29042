"""`wait_until`: the tests' wait on a condition, instead of a sleep for a guessed time that is
too long on a fast machine and too short on a loaded one."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 30, what: str = "the condition",
               every: float = 0.02) -> None:  # fmt: skip
    """Poll `condition` until it holds; fail after `timeout` s, naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g} s")
        time.sleep(every)
