"""`mldbg.mxnet.Hook`: record a Gluon (MXNet) model. See `mldbg.frameworks.mxnet`."""

from mldbg.frameworks.mxnet import Hook

__all__ = ["Hook"]
