from mldbg.trial.tensor import Tensor
from mldbg.trial.trial import Trial, create_trial

__all__ = ["Tensor", "Trial", "create_trial"]
