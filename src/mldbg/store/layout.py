"""Where each file of a run lives inside its store (documented in FORMAT.md)."""

WORKERS = "workers/"
STOP_REQUEST = "control/stop"
RECOVERY_REQUEST = "control/recover"  # SkipBatch / Rollback ask the training's Guard (mldbg.actions.recovery)
STOP_AT = "control/stop_at"  # the step at which every worker of a distributed job stops
WATCH = "watch/"  # a watcher's saved place: watch/<id>.json


def worker_prefix(worker: str) -> str:
    return f"{WORKERS}{worker}/"


def meta_key(worker: str) -> str:
    return f"{WORKERS}{worker}/meta.json"


def end_key(worker: str) -> str:
    return f"{WORKERS}{worker}/END"


def index_prefix(worker: str) -> str:
    return f"{WORKERS}{worker}/index/"


def index_key(worker: str, seq: int) -> str:
    return f"{WORKERS}{worker}/index/{seq:010d}.safetensors"


def data_key(worker: str, seq: int) -> str:
    return f"{WORKERS}{worker}/data/{seq:010d}.safetensors"


def segment_seq(key: str) -> int:
    """The number of a segment file from its key (index or data)."""
    return int(key.rsplit("/", 1)[1].split(".")[0])


def parse_segment_key(key: str) -> tuple[str, str, int] | None:
    """`workers/<worker>/<index|data>/<seq>.safetensors` -> (worker, "index" or "data", seq)."""
    parts = key.split("/")
    if len(parts) != 4 or parts[0] + "/" != WORKERS or parts[2] not in ("index", "data"):
        return None
    name = parts[3]
    if not name.endswith(".safetensors") or not name[: -len(".safetensors")].isdigit():
        return None
    return parts[1], parts[2], int(name[: -len(".safetensors")])


def segment_key(worker: str, kind: str, seq: int) -> str:
    return index_key(worker, seq) if kind == "index" else data_key(worker, seq)


# what makes a run: the files above, and nothing else, are removed when a run is replaced
PROFILER = "profiler/"  # the profiler's files, all below it (mldbg.profiler.layout)
PROFILER_WORKERS = "profiler/workers/"
PROFILER_NODES = "profiler/nodes/"
WORKER_FILES = ("meta.json", "END", "xgboost.json")


def is_worker_file(key: str, worker: str) -> bool:
    """Is `key` one of `worker`'s files of the run layout (a marker or a segment)?"""
    prefix = worker_prefix(worker)
    if not key.startswith(prefix):
        return False
    rest = key[len(prefix) :]
    return rest in WORKER_FILES or parse_segment_key(key) is not None
