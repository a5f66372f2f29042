"""Reading SageMaker Debugger / smdebug output directories (see `SmdebugStore`): event files
of TFRecord-framed protobufs and their JSON index, decoded here without tensorflow."""

from mldbg.trial.smdebug.store import SmdebugStore, is_smdebug_run

__all__ = ["SmdebugStore", "is_smdebug_run"]
