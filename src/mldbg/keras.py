"""`mldbg.keras.Hook`: record a Keras 3 model on any backend. See `mldbg.frameworks.keras`."""

from mldbg.frameworks.keras import Hook

__all__ = ["Hook"]
