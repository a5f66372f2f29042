"""A custom rule with a bug, for the sweep tests (a module of its own: Dask workers import it
by name, without the torch the test modules need)."""

from __future__ import annotations

from mldbg.rules import Rule


class AlwaysFails(Rule):
    """Raises at every step, as a rule with a bug would."""

    def check(self, trial, step):
        raise ZeroDivisionError(f"a bug at step {step}")
