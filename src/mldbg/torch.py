"""`mldbg.torch.Hook`: record a PyTorch model (see `mldbg.frameworks.torch`); `mldbg.torch.Guard`:
skip bad updates and roll back (see `mldbg.frameworks.torch_guard`)."""

from mldbg.frameworks.torch import Hook
from mldbg.frameworks.torch_guard import Guard

__all__ = ["Guard", "Hook"]
