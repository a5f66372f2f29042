"""`mldbg.lightning.DebuggerCallback`: record a Lightning training. See `mldbg.frameworks.lightning`."""

from mldbg.frameworks.lightning import DebuggerCallback

__all__ = ["DebuggerCallback"]
