from mldbg.trial.tensor import Tensor
from mldbg.trial.trial import Trial, create_trial
from mldbg.trial.worker_view import WorkerView

__all__ = ["Tensor", "Trial", "WorkerView", "create_trial"]
