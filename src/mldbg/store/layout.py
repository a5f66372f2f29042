"""Where each file of a run lives inside its store (documented in FORMAT.md)."""

WORKERS = "workers/"
STOP_REQUEST = "control/stop"
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
