"""`mldbg.tensorflow.Hook`: record custom TensorFlow loops (`tf.GradientTape`).

See `mldbg.frameworks.tensorflow`. For `model.fit` use `mldbg.keras.Hook`.
"""

from mldbg.frameworks.tensorflow import Hook

__all__ = ["Hook"]
