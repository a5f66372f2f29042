"""`mldbg.torch.Hook`: record a PyTorch model. See `mldbg.frameworks.torch`."""

from mldbg.frameworks.torch import Hook

__all__ = ["Hook"]
