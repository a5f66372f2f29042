from mldbg.trial.records import Record, Records
from mldbg.trial.tensor import Tensor
from mldbg.trial.trial import Trial, create_trial
from mldbg.trial.worker_view import WorkerView

__all__ = ["Record", "Records", "Tensor", "Trial", "WorkerView", "create_trial"]
