"""`mldbg.jax.Hook`: record pytrees of a JAX training loop. See `mldbg.frameworks.jax`."""

from mldbg.frameworks.jax import Hook

__all__ = ["Hook"]
