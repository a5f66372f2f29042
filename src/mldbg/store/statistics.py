"""Statistics: what rules read instead of raw tensors (issue 14).

A rule rarely needs a tensor; it needs a few numbers about it: the mean |gradient|, how many
NaNs, how many units of a ReLU layer fired in this batch. A hook computes those numbers where
the tensor lives (see `mldbg.frameworks.torch_statistics`) and records a few KB per step. This
module is the vocabulary, shared by every writer and reader: the names of the statistics, how
they are stored, and a NumPy reference implementation (the definition the device code is
tested against). NumPy only: no framework.

A statistic is named by a *key*: a plain name (`mean_abs`) or a name with parameters
(`outside(-9.4999,9.4999)`); `Statistic.parse` reads one and `Statistic.key` writes the
canonical form (parameters as Python float reprs, no spaces).

## Scalars (one number per tensor and step)
| key | value | index code |
| --- | --- | --- |
| `min max mean std variance sum prod l1 l2` | the reductions of `ReductionConfig`, same meaning | 0-8 |
| `<reduction>_abs` (`mean_abs` is mean \\|x\\|) | the same over \\|x\\| | 16-24 |
| `count` | number of elements | 32 |
| `nan_count`, `inf_count` | NaN elements, +-inf elements | 33, 34 |
| `zero_fraction` | share of elements exactly 0 | 35 |
| `samples` | batch size: size of axis 0 (1 for a 0-d tensor); the denominator of `unit_active` | 36 |
| `fingerprint` | sum over elements of ((A * bits + B) mod P)^2 mod P, P = 2^31 - 1 (`fingerprint()`) | 37 |
| `delta_l2` | \\|x - x_prev\\|_2, x_prev the value the last time it was computed (NaN the first time) | 38 |
| `row_range` | max over rows (slices of axis 0) of (row max - row min): 0 when every row is constant | 39 |
| `col_range` | max over positions of (max - min across rows): 0 when all rows are identical | 40 |
| `sample_change` | \\|s - s_prev\\|_2 / \\|s\\|_2 over the fixed subsample s of <= 4093 elements (`subsample_index`), s_prev that subsample the last time it was computed (NaN the first time, or when s is all zeros): how much a gradient changed since the last statistics step, for 32 KB per tensor | 42 |
| `requires_grad` | 0 for a parameter frozen now and at every TRAIN step since the previous statistics step, else 1: known by the hook, not a function of the values (the reference gives NaN) | 41 |
| `outside(lo,hi)` | share of elements <= lo or >= hi (NaN is not outside) | 64-255, per segment |
| `equal(v)` | share of elements == v (token ids, padding) | 64-255, per segment |
| `quantile(q)` | q-th percentile (0-100) of a fixed subsample of <= 4093 elements (`subsample_index`) | 64-255, per segment |

Semantics follow NumPy on the float64 values: a NaN makes min, max, mean, std, sums and norms
NaN; an empty tensor has counts 0, fingerprint 0 and every other scalar NaN (as
`record/reductions.py` does for reductions). Device code accumulates fp16/bf16/fp32 in
float32 and float64 in float64: values equal the reference to float32 rounding.

Cheap implications rules may use: `l1` (or `mean_abs`) is NaN exactly when the tensor holds a
NaN; `max_abs` is inf exactly when it holds an inf and no NaN. Both come from fused
multi-tensor kernels, so they flag non-finite tensors every step at no extra cost, and the
exact counts can come at a slower cadence.

Sharded tensors (a parameter split across ranks): `MERGES` says which scalar keys are made
exactly from the pieces' partial statistics, and how; the others are left out for them.

## Vectors (a small tensor per tensor and step), stored as `stats/<tensor>/<key>`
| key | dtype | shape | value |
| --- | --- | --- | --- |
| `unit_active` | I32 | (U,) | per unit, samples of the batch in which the unit is > 0 somewhere (its max over the sample's positions is > 0; NaN is not active); out of `samples` |
| `unit_outside(lo,hi)` | I32 | (U,) | per unit, elements <= lo or >= hi, over the batch and positions; out of `count / U` |
| `channel_count` | I32 | (C,) | per channel, finite elements (over batch and positions) |
| `channel_mean`, `channel_std` | F64 | (C,) | per channel, mean and population std of the finite elements (NaN when none) |
| `sample_fingerprints` | I32 | (N,) | per sample (slice of axis 0), the fingerprint of its elements and their positions (`sample_fingerprint()`: + C * j in each word's hash) |
| `class_counts` | I32 | (C+1,) | labels or predicted classes per class id; the last bucket counts ids outside [0, C) (an ignore_index, a bad label) |
| `class_correct` | I32 | (C+1,) | on the labels: per label class, samples predicted right |
| `confusion` | I32 | (C, C) | on the labels, when C <= 64: rows label, columns predicted class |
| `rank_nonfinite` | I32 | (R,) | a sharded tensor (DTensor): per global rank of the job, the NaN and inf elements of that rank's own piece; recorded with `nan_count`/`inf_count` at the steps where some piece holds one (the per-rank view) |

Units and channels are the same axis (`feature_axis`): the feature axis of a 2-D tensor, the
last axis of a 3-D one (N, T, F), axis 1 of a 4-D or larger one (N, C, H, W: channels first),
or the axis an adapter passes (Keras: -1, Conv1d: 1). Axis 0 is the batch; a 0-d or 1-D
tensor is one unit. A unit of a conv layer is its channel, not each position: a dead filter is
what `dead_relu` looks for, and per-position vectors would not fit the 64 KB per step budget.

`unit_outside` counts elements, not samples where the unit is saturated everywhere. Per
element is what blocks the gradient (each position of a tanh is flat or not on its own); "all
positions saturated" would never hold on a conv layer whose zero-padded borders sit near 0.
For a 2-D layer the two are the same: the count of samples in which the unit is saturated.
Counts (not fractions) add exactly across steps and workers.

Class ids: an integer prediction is its value; a float prediction with a class axis of size >
1 is its argmax along that axis (`class_axis`); a single score per sample is a binary decision
(> 0.5 when every finite score lies in [0, 1], else > 0). Labels of the predictions' shape
(one-hot, probabilities) are argmaxed the same way; other labels are class ids (a float label
that is not an integer counts as outside). C is the predictions' class-axis size (2 for a
binary score), or given. Above `MAX_CLASSES` classes (language models' vocabularies) no class
statistics are kept.

## How they are stored (FORMAT.md, "Statistics (format 2)")
Scalar statistics are reductions of their tensor's record: `format.encode_index` writes
`CodeTable.code(...)` for each key of `Record.statistics` into the reductions columns and
`CodeTable.metadata()` under the index metadata key `statistics`; `decode_index` rebuilds the
table (`CodeTable.from_metadata`) and the trial turns codes back into keys (`CodeTable.key`).
Vectors are records named by `vector_name`, in no collection; the trial leaves names for
which `parse_vector_name` is not None out of `tensor_names` (`Trial.vector_statistics` lists
a tensor's). A version-1 reader refuses these runs; version-2 readers read version-1 runs.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.store.reductions import CODES, reduce
from mldbg.store.reductions import REDUCTION_NAMES as REDUCTIONS

# the vocabulary --------------------------------------------------------------------------------
# the reductions (codes 0-8, +16 over |x|) are those of `mldbg.store.reductions`: one table
FIXED_CODES: dict[str, int] = {
    (f"{name}_abs" if is_abs else name): code for code, (name, is_abs) in sorted(CODES.items())
}
FIXED_CODES.update(
    count=32, nan_count=33, inf_count=34, zero_fraction=35, samples=36,
    fingerprint=37, delta_l2=38, row_range=39, col_range=40, requires_grad=41, sample_change=42,
)  # fmt: skip
PARAMETRIC_SCALARS: dict[str, int] = {"outside": 2, "equal": 1, "quantile": 1}  # name -> parameters
FIRST_PARAMETRIC_CODE = 64
LAST_CODE = 255  # red_code is U8

VECTORS: dict[str, str] = {  # name -> storage dtype (safetensors names)
    "unit_active": "I32",
    "unit_outside": "I32",
    "channel_count": "I32",
    "channel_mean": "F64",
    "channel_std": "F64",
    "sample_fingerprints": "I32",
    "class_counts": "I32",
    "class_correct": "I32",
    "confusion": "I32",
    "confusion_steps": "I32",  # the confusion matrix of every step since the last statistics step
    "rank_nonfinite": "I32",
}
PARAMETRIC_VECTORS: dict[str, int] = {"unit_outside": 2}
CLASS_VECTORS = ("class_counts", "class_correct", "confusion", "confusion_steps")
# a vector statistic and the scalar statistic of the same tensor that is its denominator
DENOMINATORS: dict[str, str] = {
    "unit_active": "samples",
    "unit_outside": "count",
    "channel_count": "samples",
}

# What a hook records by default (no `save_config` and no `include_collections`): for each
# collection, the statistics of its tensors that the default rules read, every step. Raw
# tensors follow the user's save config; the loss (`losses`) is saved raw every step (one
# number). Labels and predictions give the class statistics (`CLASS_VECTORS`) together.
TANH_BOUNDS = (-9.4999, 9.4999)  # tanh_saturation's defaults (RULES.md)
SIGMOID_BOUNDS = (-23.0, 16.99999)  # sigmoid_saturation's defaults
DEFAULTS: dict[str, tuple[str, ...]] = {
    # logit_growth: the attention logits of one sample per nn.MultiheadAttention (the PyTorch hook)
    "attention_logits": ("max_abs", "variance"),
    # vanishing_gradient (mean_abs over the entries that got one: zero_fraction), exploding_tensor
    # (nan/inf), gradient norms, poor init (spread), gradient_not_reset (sample_change: a sum of
    # gradients barely changes)
    "gradients": (
        "l2", "mean_abs", "max_abs", "nan_count", "inf_count", "quantile(5.0)", "quantile(95.0)", "sample_change",
        "zero_fraction",
    ),
    # weight_update_ratio and unchanged_tensor (delta_l2 over l2), tensor_variance, all_zero,
    # poor init (identical weights feeding one neuron: row_range 0), exploding_tensor,
    # frozen_layer_updated (requires_grad: the hook's declaration of frozen parameters)
    "weights": (
        "l2", "mean", "variance", "zero_fraction", "delta_l2", "row_range", "nan_count", "inf_count",
        "requires_grad",
    ),
    "biases": ("l2", "mean", "variance", "zero_fraction", "delta_l2", "nan_count", "inf_count", "requires_grad"),
    # dead_relu on the layer output; poor init (activation input variance across layers);
    # train_eval_discrepancy (scale: sqrt(variance + mean^2); the mean comes with the variance)
    "relu_activations": ("unit_active", "samples", "mean", "variance", "zero_fraction", "nan_count", "inf_count"),
    # saturation on the activation's input
    "tanh_activations": (f"unit_outside({TANH_BOUNDS[0]!r},{TANH_BOUNDS[1]!r})", "count", "mean", "variance"),
    "sigmoid_activations": (
        f"unit_outside({SIGMOID_BOUNDS[0]!r},{SIGMOID_BOUNDS[1]!r})",
        "count",
        "mean",
        "variance",
    ),
    # not_normalized_data (per channel), nlp_sequence_ratio (padding share), all_zero;
    # duplicate_batches and nondeterministic_eval (one fingerprint per sample)
    "inputs": (
        "channel_count", "channel_mean", "channel_std", "equal(0.0)", "zero_fraction", "samples",
        "sample_fingerprints",
    ),
    # all_zero / exploding_tensor on the model's output; train_eval_discrepancy (scale)
    "outputs": ("zero_fraction", "mean", "variance", "nan_count", "inf_count"),
}  # fmt: skip
# Added in EVAL and PREDICT steps: nondeterministic_eval compares the output of two forwards
# of the same inputs (the inputs' fingerprint is the sum of their `sample_fingerprints`).
EVAL_DEFAULTS: dict[str, tuple[str, ...]] = {"outputs": ("fingerprint",)}
# What every worker of a data-parallel job records at its *fingerprint steps* (the same steps
# on every worker, whatever each one's statistics cadence), worker 0 included, even with
# include_workers="one": rank_divergence compares the replicated parameters across workers,
# duplicate_batches the samples each worker trained on at the same step.
REPLICA_DEFAULTS: dict[str, tuple[str, ...]] = {
    "weights": ("fingerprint",),
    "biases": ("fingerprint",),
    "inputs": ("sample_fingerprints",),
}
# How a scalar statistic of a tensor split in pieces (a sharded parameter on several ranks) is
# made exactly from the pieces' partial statistics (`mldbg.frameworks.torch_sharded`). A key
# not here does not merge exactly (`outside`, `equal`, `col_range`, the vectors): a sharded
# tensor leaves it out.
MERGES: dict[str, str] = {
    **{k: "sum" for k in ("count", "nan_count", "inf_count", "sum", "l1", "sum_abs", "l1_abs")},
    **{k: "sqrt(sum of squares)" for k in ("l2", "l2_abs", "delta_l2")},
    **{k: "min" for k in ("min", "min_abs")},
    **{k: "max" for k in ("max", "max_abs")},
    **{k: "sum / count" for k in ("mean", "mean_abs", "zero_fraction")},
    **{k: "(count, mean, M2) by Chan's formula" for k in ("variance", "std", "variance_abs", "std_abs")},
    "prod": "product",
    "fingerprint": "sum mod P",
    "row_range": "max, when every row lies on one rank",
    "quantile": "the fixed subsample, each position from the rank holding it",
    "sample_change": "the fixed subsample, each position from the rank holding it",
    "samples": "the global shape",
    "requires_grad": "the flag",
}  # fmt: skip
FINGERPRINT_WARMUP = 20  # train steps of a data-parallel job with fingerprints at every step
FINGERPRINT_EVERY = 10  # then every this many train steps


def fingerprint_step(mode_step: int) -> bool:
    """Is this TRAIN step (the mode's own count) a fingerprint step of a data-parallel job?"""
    return mode_step < FINGERPRINT_WARMUP or mode_step % FINGERPRINT_EVERY == 0


def combined_fingerprint(sample_fingerprints: np.ndarray) -> int:
    """The key of a whole batch from its `sample_fingerprints`: their sum modulo P (each names
    its sample's values and their positions; the batch's key, the samples whatever their
    order in it)."""
    return int(np.sum(np.asarray(sample_fingerprints, dtype=np.int64)) % P)


STATS_PREFIX = "stats/"
MAX_CLASSES = 1024  # above: no class statistics (a language model's vocabulary)
MAX_CONFUSION_CLASSES = 64  # above: no confusion matrix (64 x 64 int32 is 16 KB)
QUANTILE_SAMPLE = 4093  # elements of the fixed subsample behind quantile(q); a prime, see subsample_index

# fingerprint: sum of ((A * w + B) mod P)^2 mod P over the element's 32-bit words
P = (1 << 31) - 1
A, B = 0x5BD1E995, 0x1B873593  # for the (low) 32-bit word
A_HI, B_HI = 0x2545F491, 0x68E31DA4  # for the high word of 64-bit elements
C = 0x3C6EF372  # `sample_fingerprint`: the multiplier of an element's position in its sample


@dataclass(frozen=True)
class Statistic:
    """One statistic: a name of the vocabulary and its parameters (bounds, a value, a percentile)."""

    name: str
    params: tuple[float, ...] = ()

    @functools.cached_property  # asked thousands of times a statistics step: made once
    def key(self) -> str:
        """The canonical text: `mean_abs`, `outside(-9.4999,9.4999)`, `quantile(5.0)`."""
        if not self.params:
            return self.name
        return f"{self.name}({','.join(repr(float(p)) for p in self.params)})"

    @property
    def is_vector(self) -> bool:
        return self.name in VECTORS

    @property
    def dtype(self) -> str:
        """Storage dtype: F64 for scalars (the index's red_value), the table's for vectors."""
        return VECTORS.get(self.name, "F64")

    @classmethod
    def parse(cls, text: str | Statistic) -> Statistic:
        """A statistic from its key (`mean_abs`, `outside(-1,1)`); rules ask for the same few
        keys at every step, so the parsing of each text is kept."""
        if isinstance(text, Statistic):
            return text
        return _parse(str(text))


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Statistic:
    m = re.fullmatch(r"\s*([a-z0-9_]+)\s*(?:\((.*)\))?\s*", text)
    if not m:
        raise InvalidConfig(f"statistic {text!r}: expected a name, or name(param,...) such as outside(-1,1)")
    name, args = m.group(1), m.group(2)
    wanted = PARAMETRIC_SCALARS.get(name, PARAMETRIC_VECTORS.get(name, 0))
    if name not in FIXED_CODES and name not in PARAMETRIC_SCALARS and name not in VECTORS:
        raise InvalidConfig(
            f"statistic {text!r}: unknown name {name!r}; known: "
            + ", ".join([*FIXED_CODES, *PARAMETRIC_SCALARS, *VECTORS])
        )
    try:
        params = tuple(float(p) for p in args.split(",")) if args and args.strip() else ()
    except ValueError:
        raise InvalidConfig(f"statistic {text!r}: parameters must be numbers") from None
    if len(params) != wanted:
        raise InvalidConfig(f"statistic {text!r}: {name} takes {wanted} parameter(s), got {len(params)}")
    if name in ("outside", "unit_outside") and not params[0] <= params[1]:
        raise InvalidConfig(f"statistic {text!r}: the lower bound must not exceed the upper one")
    if name == "quantile" and not 0 <= params[0] <= 100:
        raise InvalidConfig(f"statistic {text!r}: the percentile must lie in [0, 100]")
    if any(math.isnan(p) for p in params):
        raise InvalidConfig(f"statistic {text!r}: NaN parameter")
    return Statistic(name, params)


def expand(kinds: Iterable[str | Statistic]) -> tuple[Statistic, ...]:
    """The statistics asked for, parsed, with the denominators their vectors need
    (`unit_active` brings `samples`), without repeats, in order."""
    out: dict[str, Statistic] = {}
    for kind in kinds:
        s = Statistic.parse(kind)
        if s.name in CLASS_VECTORS:
            raise InvalidConfig(
                f"statistic {s.key!r}: class statistics come from labels and predictions together"
            )
        out.setdefault(s.key, s)
        if s.name in DENOMINATORS:
            d = Statistic(DENOMINATORS[s.name])
            out.setdefault(d.key, d)
    return tuple(out.values())


# record names and index codes ------------------------------------------------------------------
def vector_name(tensor: str, statistic: str | Statistic) -> str:
    """`stats/<tensor>/<key>`: the record holding a vector statistic of `tensor`."""
    return f"{STATS_PREFIX}{tensor}/{Statistic.parse(statistic).key}"


def parse_vector_name(name: str) -> tuple[str, Statistic] | None:
    """(tensor, statistic) for a `stats/...` record name, None for any other name."""
    if not name.startswith(STATS_PREFIX):
        return None
    tensor, sep, key = name[len(STATS_PREFIX) :].rpartition("/")
    if not sep or not tensor:
        return None
    try:
        stat = Statistic.parse(key)
    except InvalidConfig:
        return None
    return (tensor, stat) if stat.is_vector else None


def reduction_key(reduction: str, abs: bool = False) -> str:
    """The statistic computing a `ReductionConfig` reduction: ("mean", True) -> "mean_abs"."""
    if reduction not in REDUCTIONS:
        raise InvalidConfig(f"reduction {reduction!r}: expected one of {', '.join(REDUCTIONS)}")
    return f"{reduction}_abs" if abs else reduction


class CodeTable:
    """Index codes of scalar statistics in one segment: the fixed codes, and codes 64-255
    numbered in order of first use for statistics with parameters (kept in the index metadata
    under `statistics`, so every segment says what its codes mean)."""

    def __init__(self, parametric: Mapping[int, str] | None = None):
        self._keys: dict[int, str] = {}
        self._codes: dict[str, int] = {}
        self._by_text: dict[str, int] = {}  # `code()` of a key as given
        for code, key in sorted((parametric or {}).items()):
            stat = Statistic.parse(key)
            if stat.name not in PARAMETRIC_SCALARS or not FIRST_PARAMETRIC_CODE <= code <= LAST_CODE:
                raise InvalidConfig(f"statistics code {code} -> {key!r}: not a parametric statistic code")
            self._keys[code], self._codes[stat.key] = stat.key, code

    def code(self, statistic: str | Statistic) -> int:
        if type(statistic) is str:  # the same few keys, for every record of a segment
            found = self._by_text.get(statistic)
            if found is not None:
                return found
            found = self._by_text[statistic] = self._code(statistic)
            return found
        return self._code(statistic)

    def _code(self, statistic: str | Statistic) -> int:
        stat = Statistic.parse(statistic)
        if stat.name in FIXED_CODES:
            return FIXED_CODES[stat.name]
        if stat.name not in PARAMETRIC_SCALARS:
            raise InvalidConfig(
                f"statistic {stat.key!r} is a vector: it is stored as {vector_name('<tensor>', stat)}"
            )
        code = self._codes.get(stat.key)
        if code is None:
            code = FIRST_PARAMETRIC_CODE + len(self._keys)
            if code > LAST_CODE:
                raise InvalidConfig(
                    f"statistic {stat.key!r}: more than {LAST_CODE - FIRST_PARAMETRIC_CODE + 1} "
                    "parametric statistics in one segment"
                )
            self._keys[code], self._codes[stat.key] = stat.key, code
        return code

    def key(self, code: int) -> str:
        for name, fixed in FIXED_CODES.items():
            if fixed == code:
                return name
        try:
            return self._keys[code]
        except KeyError:
            raise InvalidConfig(f"statistics code {code} is not defined in this segment") from None

    def metadata(self) -> dict[str, str]:
        """The index metadata value: {"64": "outside(-9.4999,9.4999)", ...}."""
        return {str(code): key for code, key in sorted(self._keys.items())}

    @classmethod
    def from_metadata(cls, meta: Mapping[str, str] | None) -> CodeTable:
        return cls({int(code): key for code, key in (meta or {}).items()})


# axes ------------------------------------------------------------------------------------------
def feature_axis(ndim: int, axis: int | None = None) -> int | None:
    """The unit / channel axis of a tensor of `ndim` dimensions (None: the tensor is one unit).

    2-D (N, F): 1; 3-D (N, T, F): 2; 4-D and more (N, C, ...): 1; or `axis` when an adapter
    knows better (channels-last Keras: -1). Never 0, the batch axis."""
    if ndim <= 1:
        return None
    if axis is not None:
        a = axis % ndim
        if a == 0:
            raise InvalidConfig(f"unit axis {axis} of a {ndim}-D tensor is the batch axis")
        return a
    return 2 if ndim == 3 else 1


def class_axis(
    pred_shape: Sequence[int], labels_shape: Sequence[int] | None = None, axis: int | None = None
) -> int | None:
    """The axis of a prediction tensor that scores the classes, or None (one score per sample).

    Given, or the axis (1, then -1) whose removal leaves the labels' shape, or 1 (PyTorch puts
    classes on axis 1; for 2-D that is also the last axis). A size-1 axis scores no classes."""
    ndim = len(pred_shape)
    if ndim < 2:
        return None
    if axis is None:
        axis = 1
        if labels_shape is not None and ndim == len(labels_shape) + 1:
            for a in (1, ndim - 1):
                if tuple(pred_shape[:a]) + tuple(pred_shape[a + 1 :]) == tuple(labels_shape):
                    axis = a
                    break
    axis %= ndim
    return axis if pred_shape[axis] > 1 else None


def subsample_index(n: int) -> np.ndarray:
    """The elements (flat, C order) behind `quantile(q)`: all of them up to `QUANTILE_SAMPLE`,
    else floor(j * n / K) for j < K = 4093. The step n/K is rarely an integer (K is prime), so
    the sample does not line up with the rows of a weight matrix and pick a few columns."""
    if n <= QUANTILE_SAMPLE:
        return np.arange(n, dtype=np.int64)
    return (np.arange(QUANTILE_SAMPLE, dtype=np.int64) * n) // QUANTILE_SAMPLE


def quantile_position(m: int, q: float) -> tuple[int, int, float]:
    """(lower index, upper index, weight) of the q-th percentile in a sorted sample of m values
    (NumPy's default, linear interpolation)."""
    pos = q / 100.0 * (m - 1)
    lo = math.floor(pos)
    return lo, min(lo + 1, m - 1), pos - lo


def interpolate(a: float, b: float, t: float) -> float:
    """a + (b - a) * t, and a itself when a == b (so two equal infinities give that infinity)."""
    return a if a == b else a + (b - a) * t


# the NumPy reference ---------------------------------------------------------------------------
Value = float | np.ndarray


def compute(
    array: np.ndarray,
    kinds: Iterable[str | Statistic],
    *,
    unit_axis: int | None = None,
    previous: np.ndarray | None = None,
) -> dict[str, Value]:
    """The statistics of one tensor (key -> float or ndarray), by definition, in float64.

    `previous` is the tensor's value the last time (for `delta_l2` and `sample_change`). A bfloat16 tensor is
    passed as its float32 values (exact); its `fingerprint` is taken from its bits (`fingerprint`
    of the uint16 bit pattern), as the store keeps them."""
    x = np.asarray(array)
    f = x.astype(np.float64)
    out: dict[str, Value] = {}
    with np.errstate(all="ignore"):
        for stat in expand(kinds):
            out[stat.key] = _one(stat, x, f, unit_axis, previous)
    return out


def _one(
    stat: Statistic, x: np.ndarray, f: np.ndarray, unit_axis: int | None, previous: np.ndarray | None
) -> Value:
    name, n = stat.name, f.size
    if name == "count":
        return float(n)
    if name == "nan_count":
        return float(np.count_nonzero(np.isnan(f)))
    if name == "inf_count":
        return float(np.count_nonzero(np.isinf(f)))
    if name == "samples":
        return float(x.shape[0]) if x.ndim else 1.0
    if name == "fingerprint":
        return float(fingerprint(x))
    if name == "requires_grad":  # a parameter's flag, not in its values
        return math.nan
    if name in VECTORS:
        return _vector(stat, x, f, unit_axis)
    if n == 0:
        return math.nan
    if name in FIXED_CODES and FIXED_CODES[name] < 32:
        base, is_abs = CODES[FIXED_CODES[name]]
        return reduce(f, base, is_abs)
    if name == "zero_fraction":
        return np.count_nonzero(f == 0) / n
    if name == "outside":
        lo, hi = stat.params
        return np.count_nonzero((f <= lo) | (f >= hi)) / n
    if name == "equal":
        return np.count_nonzero(f == stat.params[0]) / n
    if name == "quantile":
        sample = np.sort(f.reshape(-1)[subsample_index(n)])
        if np.isnan(sample[-1]):
            return math.nan
        lo, hi, t = quantile_position(sample.size, stat.params[0])
        return float(interpolate(sample[lo], sample[hi], t))
    if name == "delta_l2":
        if previous is None or np.shape(previous) != x.shape:
            return math.nan
        return float(np.sqrt(np.sum(np.square(f - np.asarray(previous, dtype=np.float64)))))
    if name == "sample_change":
        if previous is None or np.shape(previous) != x.shape:
            return math.nan
        index = subsample_index(n)
        sample = f.reshape(-1)[index]
        norm = float(np.sqrt(np.sum(np.square(sample))))
        before = np.asarray(previous, dtype=np.float64).reshape(-1)[index]
        return float(np.sqrt(np.sum(np.square(sample - before)))) / norm if norm > 0 else math.nan
    if name in ("row_range", "col_range"):
        rows = _rows(f)
        axis = 1 if name == "row_range" else 0
        if rows.shape[axis] == 0:
            return math.nan
        return float(np.max(np.max(rows, axis=axis) - np.min(rows, axis=axis)))
    raise InvalidConfig(f"statistic {stat.key!r} has no reference implementation")  # pragma: no cover


def _rows(x: np.ndarray) -> np.ndarray:
    """The tensor as (slices of axis 0, their elements); a 0-d tensor is one row."""
    return x.reshape(1, 1) if x.ndim == 0 else x.reshape(x.shape[0], math.prod(x.shape[1:]))


def _units(x: np.ndarray, axis: int | None) -> np.ndarray:
    """The tensor as (samples, units, positions)."""
    if x.ndim == 0:
        return x.reshape(1, 1, 1)
    a = feature_axis(x.ndim, axis)
    if a is None:
        return x.reshape(x.shape[0], 1, 1)
    moved = np.moveaxis(x, a, 1)
    return moved.reshape(moved.shape[0], moved.shape[1], math.prod(moved.shape[2:]))


def _vector(stat: Statistic, x: np.ndarray, f: np.ndarray, axis: int | None) -> np.ndarray:
    name = stat.name
    u = _units(f, axis)
    if name == "unit_active":
        if u.size == 0:
            return np.zeros(u.shape[1], dtype=np.int32)
        return np.count_nonzero(np.max(u, axis=2) > 0, axis=0).astype(np.int32)
    if name == "unit_outside":
        lo, hi = stat.params
        return np.count_nonzero((u <= lo) | (u >= hi), axis=(0, 2)).astype(np.int32)
    if name in ("channel_count", "channel_mean", "channel_std"):
        finite = np.isfinite(u)
        count = np.count_nonzero(finite, axis=(0, 2))
        if name == "channel_count":
            return count.astype(np.int32)
        v = np.where(finite, u, 0.0)
        mean = v.sum(axis=(0, 2)) / count  # NaN where a channel has no finite element
        if name == "channel_mean":
            return mean
        centered = np.where(finite, u - mean[None, :, None], 0.0)
        return np.sqrt(np.sum(centered * centered, axis=(0, 2)) / count)
    if name == "sample_fingerprints":
        return np.array([sample_fingerprint(r) for r in _rows(x)], dtype=np.int32).reshape(-1)
    raise InvalidConfig(f"statistic {stat.key!r} has no reference implementation")  # pragma: no cover


def _words(x: np.ndarray) -> list[tuple[np.ndarray, int, int]]:
    """The element bit patterns as unsigned 32-bit words, each with its (multiplier, offset)."""
    flat = np.ascontiguousarray(x).reshape(-1)
    size = flat.dtype.itemsize
    bits = flat.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]).astype(np.uint64)
    if size < 8:
        return [(bits, A, B)]
    return [(bits & 0xFFFFFFFF, A, B), (bits >> np.uint64(32), A_HI, B_HI)]


def fingerprint(array: np.ndarray) -> int:
    """sum over elements of ((A * w + B) mod P)^2 mod P, w each 32-bit word of the element's bit
    pattern (the low and high words of a 64-bit element, with their own A, B), P = 2^31 - 1.

    Exact integer arithmetic: the same bits give the same fingerprint on any device, in any
    summation order, whatever the dtype is called (bfloat16: pass its uint16 bits). It ignores
    the order of the elements (a multiset hash): it tells whether a tensor changed, not where."""
    return _hash(np.asarray(array), positions=False)


def sample_fingerprint(array: np.ndarray) -> int:
    """The fingerprint of one sample (`sample_fingerprints`): as `fingerprint`, each word's
    (A * w + B) with C * j added, j the element's position in the flattened sample, so that
    it names the sample and not only its values: a flipped image, a maze with its agent
    elsewhere, a one-hot row with its one elsewhere hash apart (`fingerprint`, a multiset
    hash, gave each the same value)."""
    return _hash(np.asarray(array), positions=True)


def _hash(array: np.ndarray, positions: bool) -> int:
    pos = (
        (np.arange(array.size, dtype=np.uint64) * np.uint64(C)) % np.uint64(P) if positions else np.uint64(0)
    )
    total = 0
    for words, a, b in _words(array):
        r = (words * np.uint64(a) + np.uint64(b) + pos) % np.uint64(P)  # < 2^63 + 2^32: no wrap
        total += int(np.sum((r * r) % np.uint64(P), dtype=np.uint64) % np.uint64(P))  # < 2^31 each
    return total % P


def class_ids(
    labels: np.ndarray | None, predictions: np.ndarray | None, classes: int | None, axis: int | None
) -> tuple[np.ndarray | None, np.ndarray | None, int | None]:
    """(label ids, predicted ids, number of classes C), each flat; ids outside [0, C) are kept
    as they are (they go to the last bucket). C is None when it cannot be told."""
    y = p = None
    c = classes
    if predictions is not None:
        pr = np.asarray(predictions)
        ax = (
            class_axis(pr.shape, None if labels is None else np.shape(labels), axis)
            if pr.dtype.kind == "f"
            else None
        )
        if pr.dtype.kind in "iub":
            p = pr.astype(np.int64).reshape(-1)
        elif ax is not None:
            p = np.argmax(pr, axis=ax).reshape(-1)
            c = c if c is not None else pr.shape[ax]
        else:
            scores = pr.reshape(-1).astype(np.float64)
            finite = scores[np.isfinite(scores)]
            threshold = 0.5 if finite.size and finite.min() >= 0 and finite.max() <= 1 else 0.0
            p = (scores > threshold).astype(np.int64)
            c = c if c is not None else 2
    if labels is not None:
        lb = np.asarray(labels)
        ax = None
        if predictions is not None and lb.dtype.kind == "f" and lb.shape == np.shape(predictions):
            ax = class_axis(lb.shape, None, axis)
        if ax is not None:
            y = np.argmax(lb, axis=ax).reshape(-1)
        elif lb.dtype.kind == "f":
            v = lb.reshape(-1).astype(np.float64)
            with np.errstate(invalid="ignore"):
                ok = np.isfinite(v) & (v == np.floor(v)) & (np.abs(v) < 2**62)
            y = np.where(ok, np.where(ok, v, 0).astype(np.int64), -1)
        else:
            y = lb.astype(np.int64).reshape(-1)
    if c is None:  # integer ids everywhere: the largest id seen
        seen = [a for a in (y, p) if a is not None and a.size]
        c = int(max(a.max() for a in seen)) + 1 if seen else None
        c = max(c, 1) if c is not None else None
    return y, p, c


def _counts(ids: np.ndarray, c: int, weights: np.ndarray | None = None) -> np.ndarray:
    bucket = np.where((ids >= 0) & (ids < c), ids, c)
    return np.bincount(bucket, weights=weights, minlength=c + 1).astype(np.int32)


def class_statistics(
    labels: np.ndarray | None,
    predictions: np.ndarray | None = None,
    *,
    classes: int | None = None,
    class_axis: int | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(statistics of the labels, statistics of the predictions): `class_counts` of each, and
    on the labels `class_correct` and (C <= 64) `confusion` when both are given and pair up.
    Empty dicts when C is unknown or above `MAX_CLASSES`."""
    y, p, c = class_ids(labels, predictions, classes, class_axis)
    if c is None or c > MAX_CLASSES:
        return {}, {}
    on_labels: dict[str, np.ndarray] = {}
    on_preds: dict[str, np.ndarray] = {}
    if y is not None:
        on_labels["class_counts"] = _counts(y, c)
    if p is not None:
        on_preds["class_counts"] = _counts(p, c)
    if y is not None and p is not None and y.size == p.size:
        on_labels["class_correct"] = _counts(y, c, (y == p).astype(np.float64))
        if c <= MAX_CONFUSION_CLASSES:
            ok = (y >= 0) & (y < c) & (p >= 0) & (p < c)
            cells = np.bincount(y[ok] * c + p[ok], minlength=c * c)
            on_labels["confusion"] = cells.reshape(c, c).astype(np.int32)
    return on_labels, on_preds


def merge_moments(
    a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(count, mean, std) per channel of two batches -> of both (Chan et al.): how a rule adds
    up `channel_count`, `channel_mean` and `channel_std` over steps, exactly."""
    na, ma, sa = (np.asarray(v, dtype=np.float64) for v in a)
    nb, mb, sb = (np.asarray(v, dtype=np.float64) for v in b)
    n = na + nb
    with np.errstate(invalid="ignore", divide="ignore"):
        wa, wb = np.where(n > 0, na / n, 0.0), np.where(n > 0, nb / n, 0.0)
        mean = np.where(na > 0, np.nan_to_num(ma) * wa, 0.0) + np.where(nb > 0, np.nan_to_num(mb) * wb, 0.0)
        m2 = np.where(na > 0, na * np.nan_to_num(sa) ** 2, 0.0) + np.where(
            nb > 0, nb * np.nan_to_num(sb) ** 2, 0.0
        )
        m2 = m2 + np.where((na > 0) & (nb > 0), (np.nan_to_num(ma) - np.nan_to_num(mb)) ** 2 * na * wb, 0.0)
        std = np.sqrt(m2 / n)
    return n, np.where(n > 0, mean, np.nan), np.where(n > 0, std, np.nan)
