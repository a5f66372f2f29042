"""`tf_statistics` against the NumPy reference on awkward tensors (NaN, inf, float16,
bfloat16, float64, integers, empty, 4-D channels-last), eagerly and inside a traced graph, for
test_tf_statistics.py; run in a subprocess: `python tf_statistics_job.py OUT_DIR`. Writes
manifest.json: how many values were compared and every mismatch."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from mldbg.frameworks import tf_statistics as ts  # noqa: E402
from mldbg.store import statistics as st  # noqa: E402

KINDS = tuple(dict.fromkeys(k for kinds in st.DEFAULTS.values() for k in kinds if k != "requires_grad"))
KINDS = (*KINDS, "fingerprint", "min", "max", "std", "sum", "l1", "col_range", "outside(-1.0,1.0)")


def arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    nan = a.copy()
    nan[1, 2] = np.nan
    inf = a.copy()
    inf[0, 0], inf[2, 1] = np.inf, -np.inf
    conv = (rng.standard_normal((4, 3, 3, 2)) * 3).astype(np.float32)
    conv[0, :, :, 1] = np.maximum(conv[0, :, :, 1], 0)
    return {
        "f32": a,
        "f32_nan": nan,
        "f32_inf": inf,
        "f16": (a * 10).astype(np.float16),
        "bf16": a.astype(ml_dtypes.bfloat16),
        "f64": a.astype(np.float64) * 1e3,
        "i32": rng.integers(-5, 5, (7, 3)).astype(np.int32),
        "zeros": np.zeros((3, 4), np.float32),
        "conv": conv,
        "big": rng.standard_normal((70, 90)).astype(np.float32),  # > 4093 elements: a subsample
    }


def traced(names: list, state: ts.GraphState, layouts: dict, tensors: list) -> tf.Tensor:
    """The statistics of a step inside a traced graph; its layout into `layouts["step"]`."""
    entries = [(n, k, t) for (n, k), t in zip(names, tensors, strict=True)]
    packed, layouts["step"] = ts.graph_statistics(entries, state, -1, None)
    return packed


def close(got: float | np.ndarray, want: float | np.ndarray) -> bool:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if g.shape != w.shape:
        return False
    return bool(np.all((np.isnan(g) & np.isnan(w)) | (g == w) | np.isclose(g, w, rtol=1e-9, atol=1e-12)))


def main() -> None:
    out = Path(sys.argv[1])
    compared, wrong = 0, []
    for graph in (False, True):
        previous: dict[str, np.ndarray] = {}
        device = ts.TFStatistics()
        state = ts.GraphState()
        for step in range(2):
            data = {name: a * (1 + step) if a.dtype.kind == "f" else a for name, a in arrays().items()}
            requests = [(name, KINDS, tf.constant(a)) for name, a in data.items()]
            if graph:
                layouts: dict[str, tuple] = {}
                names = [(n, k) for n, k, _ in requests]
                packed = tf.function(functools.partial(traced, names, state, layouts))(
                    [t for _, _, t in requests]
                )
                values = ts.unpack(packed.numpy(), layouts["step"])
            else:
                for name, kinds, t in requests:
                    device.add(name, t, kinds, ("weights",), -1)
                values = device.finish()[0]()
            for name, a in data.items():
                ref = a.astype(np.float32) if a.dtype == ml_dtypes.bfloat16 else a
                axis = -1 if a.ndim > 2 else None
                want = st.compute(ref, KINDS, unit_axis=axis, previous=previous.get(name))
                for key, w in want.items():
                    compared += 1
                    if not close(values[name][key], w):
                        wrong.append([graph, step, name, key, str(values[name][key]), str(w)])
                previous[name] = ref
    # class statistics: integer labels with logits, one-hot float labels, binary scores
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((12, 4)).astype(np.float32)
    cases = {
        "ids": (rng.integers(0, 5, 12).astype(np.int32), logits),  # 5 is outside the 4 classes
        "one-hot": (np.eye(4, dtype=np.float32)[rng.integers(0, 4, 12)], logits),
        "binary": (rng.integers(0, 2, (12, 1)).astype(np.float32), rng.random((12, 1)).astype(np.float32)),
    }
    for case, (labels, preds) in cases.items():
        got_l, got_p = ts.class_statistics(tf.constant(labels), tf.constant(preds))
        want_l, want_p = st.class_statistics(labels, preds)
        for key, w in [*((f"labels {k}", v) for k, v in want_l.items()), *((f"preds {k}", v) for k, v in want_p.items())]:  # fmt: skip
            side, stat = key.split()
            got = (got_l if side == "labels" else got_p)[stat].numpy()
            compared += 1
            if not np.array_equal(got, w):
                wrong.append([case, key, str(got), str(w)])
    (out / "manifest.json").write_text(json.dumps({"compared": compared, "wrong": wrong}))


if __name__ == "__main__":
    main()
