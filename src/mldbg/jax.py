"""`mldbg.jax.Hook`: record pytrees of a JAX training loop; `mldbg.jax.statistics`: the
default rules' statistics of a step, inside your jitted step. See `mldbg.frameworks.jax`."""

from mldbg.frameworks.jax import Hook, Statistics, statistics

__all__ = ["Hook", "Statistics", "statistics"]
