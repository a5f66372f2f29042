"""Where the profiler's files live inside a run's store (documented in docs/profiler.md).

Everything is below `profiler/`, beside the tensors' `workers/`, so a Trial never mistakes a
sample for a step:

```
profiler/nodes/<node>/meta.json                 cores, GPUs, notes ("no GPU: ...")
profiler/nodes/<node>/system/<seq>.safetensors  node samples: per-core CPU, I/O wait, memory, disk, network, GPUs
profiler/workers/<worker>/meta.json             node, pid, process start, config
profiler/workers/<worker>/END                   written when the profiler closes
profiler/workers/<worker>/process/<seq>.safetensors   the worker process: CPU (with its children), RSS, children
profiler/workers/<worker>/steps/<seq>.safetensors     one row per step: start, end, data, forward, backward, optimizer
profiler/workers/<worker>/torch/steps_<a>-<b>.trace.json.gz   torch.profiler Chrome trace of steps a..b
profiler/workers/<worker>/torch/steps_<a>-<b>.ops.json        its top operators
profiler/workers/<worker>/python/steps_<a>-<b>.prof           cProfile stats (pstats.Stats reads it)
profiler/workers/<worker>/python/steps_<a>-<b>.json           its top functions
```
"""

from __future__ import annotations

import re

ROOT = "profiler/"
NODES = "profiler/nodes/"
WORKERS = "profiler/workers/"

SYSTEM = "system"
PROCESS = "process"
STEPS = "steps"


def node_meta_key(node: str) -> str:
    return f"{NODES}{node}/meta.json"


def node_stream(node: str, stream: str = SYSTEM) -> str:
    return f"{NODES}{node}/{stream}/"


def worker_meta_key(worker: str) -> str:
    return f"{WORKERS}{worker}/meta.json"


def worker_end_key(worker: str) -> str:
    return f"{WORKERS}{worker}/END"


def worker_stream(worker: str, stream: str) -> str:
    return f"{WORKERS}{worker}/{stream}/"


def chunk_key(prefix: str, seq: int) -> str:
    return f"{prefix}{seq:010d}.safetensors"


def window_key(worker: str, kind: str, start: int, end: int, suffix: str) -> str:
    """kind: 'torch' or 'python'; steps start..end inclusive."""
    return f"{WORKERS}{worker}/{kind}/steps_{start}-{end}{suffix}"


def safe_name(name: str) -> str:
    """A host name as a store key part (no slashes, no dots at the ends)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip(".") or "node"
    return cleaned[:100]
