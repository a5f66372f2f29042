"""Log: write findings to Python logging, or as JSON lines to a file."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mldbg.actions.base import Action, Context, register_action

if TYPE_CHECKING:
    from mldbg.rules.base import Finding


@register_action
class Log(Action):
    """Log every distinct finding: to the `mldbg` logger at `level`, or, with `path`, as one
    JSON object per line appended to that file (the keys of `mldbg check --json`, plus
    `run` and `time`)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        level: int | str = logging.WARNING,
        logger: str = "mldbg",
        rules: Iterable[str] | None = None,
        **gate: Any,
    ):
        gate.setdefault("once_per_rule", False)
        super().__init__(rules=rules, **gate)
        self.path = None if path is None else os.fspath(path)
        self.level = logging.getLevelName(level.upper()) if isinstance(level, str) else level
        self.logger = logging.getLogger(logger)

    def describe(self) -> str:
        return f"Log to {self.path}" if self.path else f"Log to logger {self.logger.name!r}"

    def act(self, findings: list[Finding], context: Context) -> None:
        if self.path is None:
            for f in findings:
                self.logger.log(self.level, "%s", f)
            return
        now = time.time()
        lines = [json.dumps({**f.to_dict(), "run": context.run, "time": now}) + "\n" for f in findings]
        with open(self.path, "a", encoding="utf-8") as out:
            out.writelines(lines)
