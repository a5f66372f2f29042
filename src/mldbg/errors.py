"""One exception tree for everything mldbg raises on purpose.

Each message names the file, tensor, step or setting at fault and says what to do.
"""

from __future__ import annotations

from collections.abc import Iterable


class MldbgError(Exception):
    """Base of every error mldbg raises on purpose."""


class InvalidConfig(MldbgError, ValueError):
    """A setting, collection name, regex or config file is wrong."""


class CorruptRecord(MldbgError):
    """A file of a recorded run cannot be decoded: truncated, overwritten or not mldbg's."""


class TensorUnavailable(MldbgError, KeyError):
    """No tensor of that name was ever recorded in this run."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TensorUnavailableForStep(MldbgError):
    """The tensor exists, but was not saved at that step (or mode, or worker)."""


class StepNotYetAvailable(MldbgError):
    """The step has not been written yet; the run is still going."""


class StepUnavailable(MldbgError):
    """The step will never be available: training ended without saving it."""


class NoMoreData(StepUnavailable):
    """Training ended; no step beyond the last one will come (a kind of StepUnavailable)."""


class RunNotFound(MldbgError, FileNotFoundError):
    """No recorded run at that path: it does not exist, is a file, or holds no run."""

    def __str__(self) -> str:  # OSError would print its args as a tuple
        return str(self.args[0]) if self.args else ""


class StoreError(MldbgError):
    """The store (a directory or a bucket) could not be read or written."""


class StoreFull(StoreError):
    """A write was dropped, not kept for a retry: the bucket is unreachable and its local spill
    folder is at its bound or cannot be written (disk full). Training goes on without it."""


class TrainingStopped(MldbgError):
    """Raised in the training process at the step boundary after a stop action fired."""


def did_you_mean(word: object, choices: Iterable[str], n: int = 1) -> str:
    """`"; did you mean 'x'?"` for the closest of `choices` to a misspelled `word` (case
    aside), or "" when none is close: the hint every error about an unknown name carries."""
    import difflib

    options = list(choices)
    lowered = {c.lower(): c for c in options}
    close = difflib.get_close_matches(str(word).lower(), list(lowered), n=n)
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(lowered[c]) for c in close)}?"
