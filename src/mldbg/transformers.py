"""`mldbg.transformers.DebuggerCallback`: record a Hugging Face `Trainer`. See `mldbg.frameworks.transformers`."""

from mldbg.frameworks.transformers import DebuggerCallback

__all__ = ["DebuggerCallback"]
