"""The statistics vocabulary and its NumPy reference, against plain NumPy, scikit-learn and the
rules' own helpers (the reference is the definition the device code is tested against)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import confusion_matrix

from mldbg.errors import InvalidConfig
from mldbg.rules.labels import label_ids, predicted_ids
from mldbg.rules.stats import unit_fraction
from mldbg.store import statistics as st
from mldbg.store.reductions import REDUCTION_NAMES, reduction_code
from mldbg.store.statistics import CodeTable, Statistic

RNG = np.random.default_rng(0)


# names, keys and codes ------------------------------------------------------------------------
def test_keys_are_canonical_and_parse_back():
    s = Statistic.parse(" outside( -9.4999 , 9.4999 ) ")
    assert s == Statistic("outside", (-9.4999, 9.4999))
    assert s.key == "outside(-9.4999,9.4999)"
    assert Statistic.parse(s.key) == s
    assert Statistic.parse("quantile(5)").key == "quantile(5.0)"
    assert Statistic.parse("mean_abs").key == "mean_abs" and not Statistic.parse("mean_abs").is_vector
    assert Statistic.parse("unit_active").is_vector and Statistic.parse("unit_active").dtype == "I32"
    assert Statistic.parse("channel_mean").dtype == "F64" and Statistic.parse("l2").dtype == "F64"


@pytest.mark.parametrize(
    "bad",
    ["nonsense", "mean(1)", "outside(1)", "outside(2,1)", "quantile(101)", "equal(x)", "outside(nan,1)", "("],
)
def test_bad_statistics_are_refused_with_the_reason(bad):
    with pytest.raises(InvalidConfig, match="statistic"):
        Statistic.parse(bad)


def test_expand_adds_denominators_once_and_refuses_class_statistics():
    keys = [s.key for s in st.expand(["unit_active", "unit_outside(-1,1)", "samples", "l2", "l2"])]
    assert keys == ["unit_active", "samples", "unit_outside(-1.0,1.0)", "count", "l2"]
    with pytest.raises(InvalidConfig, match="labels and predictions"):
        st.expand(["class_counts"])


def test_reduction_codes_are_the_formats():
    """ReductionConfig's reductions keep their index codes, so old readers' meaning holds."""
    for name in REDUCTION_NAMES:
        assert st.FIXED_CODES[st.reduction_key(name)] == reduction_code(name)
        assert st.FIXED_CODES[st.reduction_key(name, abs=True)] == reduction_code(name, abs=True)
    assert st.reduction_key("mean", abs=True) == "mean_abs"
    codes = list(st.FIXED_CODES.values())
    assert len(codes) == len(set(codes)) and max(codes) < st.FIRST_PARAMETRIC_CODE
    with pytest.raises(InvalidConfig):
        st.reduction_key("median")


def test_code_table_numbers_parametric_statistics_per_segment_and_round_trips():
    table = CodeTable()
    assert table.code("mean_abs") == 18 and table.code("nan_count") == 33
    a, b = table.code("outside(-9.4999,9.4999)"), table.code("quantile(5)")
    assert (a, b) == (64, 65) and table.code("outside(-9.4999, 9.4999)") == 64
    meta = table.metadata()
    assert meta == {"64": "outside(-9.4999,9.4999)", "65": "quantile(5.0)"}
    again = CodeTable.from_metadata(meta)
    assert again.key(64) == "outside(-9.4999,9.4999)" and again.key(18) == "mean_abs"
    assert again.code("equal(0)") == 66
    with pytest.raises(InvalidConfig, match="not defined"):
        CodeTable().key(70)
    with pytest.raises(InvalidConfig, match="vector"):
        table.code("unit_active")
    full = CodeTable()
    for q in range(st.LAST_CODE - st.FIRST_PARAMETRIC_CODE + 1):
        full.code(f"equal({q})")
    with pytest.raises(InvalidConfig, match="parametric statistics in one segment"):
        full.code("equal(-1)")


def test_vector_names_round_trip_with_slashes_in_tensor_names():
    name = st.vector_name("gradient/fc1.weight", "unit_outside(-1, 1)")
    assert name == "stats/gradient/fc1.weight/unit_outside(-1.0,1.0)"
    assert st.parse_vector_name(name) == ("gradient/fc1.weight", Statistic("unit_outside", (-1.0, 1.0)))
    assert st.parse_vector_name("fc1.weight") is None
    assert st.parse_vector_name("stats/fc1.weight/l2") is None  # a scalar is a reduction, not a record
    assert st.parse_vector_name("stats/unit_active") is None


def test_axes():
    assert [st.feature_axis(n) for n in range(6)] == [None, None, 1, 2, 1, 1]
    assert st.feature_axis(4, -1) == 3
    with pytest.raises(InvalidConfig, match="batch axis"):
        st.feature_axis(4, 0)
    assert st.class_axis((8, 10)) == 1
    assert st.class_axis((8, 1)) is None and st.class_axis((8,)) is None
    assert st.class_axis((4, 3, 5, 6), (4, 5, 6)) == 1
    assert st.class_axis((4, 5, 6, 3), (4, 5, 6)) == 3
    assert st.class_axis((4, 5, 6, 3), None, -1) == 3


# scalars --------------------------------------------------------------------------------------
SCALARS = [
    *st.REDUCTIONS,
    *(f"{r}_abs" for r in st.REDUCTIONS),
    "count",
    "nan_count",
    "inf_count",
    "zero_fraction",
]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int64, np.bool_])
def test_scalars_are_numpy_on_the_values(dtype):
    x = (RNG.standard_normal((6, 5, 3)) * 3).astype(dtype)
    if dtype != np.bool_:
        x[0, 0, 0] = 0
    out = st.compute(x, SCALARS)
    f = x.astype(np.float64)
    assert out["count"] == 90 and out["nan_count"] == 0 and out["inf_count"] == 0
    for name, fn in [("min", np.min), ("max", np.max), ("mean", np.mean), ("std", np.std), ("variance", np.var),
                     ("sum", np.sum), ("prod", np.prod)]:  # fmt: skip
        assert out[name] == pytest.approx(fn(f), rel=1e-12, nan_ok=True)
        assert out[f"{name}_abs"] == pytest.approx(fn(np.abs(f)), rel=1e-12, nan_ok=True)
    assert out["l1"] == pytest.approx(np.abs(f).sum()) and out["l2"] == pytest.approx(np.linalg.norm(f))
    assert out["mean_abs"] == pytest.approx(np.mean(np.abs(f)))
    assert out["zero_fraction"] == pytest.approx(np.mean(f == 0))


def test_non_finite_values_propagate_as_in_numpy_and_are_counted():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0, 0.0], dtype=np.float32)
    out = st.compute(x, [*SCALARS, "outside(-1,1)", "equal(0)", "quantile(50)"])
    assert out["nan_count"] == 1 and out["inf_count"] == 2 and out["count"] == 6
    for name in ("min", "max", "mean", "std", "sum", "l1", "l2", "mean_abs", "quantile(50.0)"):
        assert math.isnan(out[name]), name
    assert out["zero_fraction"] == pytest.approx(2 / 6)
    assert out["outside(-1.0,1.0)"] == pytest.approx(3 / 6)  # 1.0 and the two infinities; NaN is not outside
    assert out["equal(0.0)"] == pytest.approx(2 / 6)
    inf_only = st.compute(np.array([1.0, np.inf]), ["max_abs", "l1", "mean", "std"])
    assert inf_only["max_abs"] == math.inf and inf_only["l1"] == math.inf and inf_only["mean"] == math.inf
    assert math.isnan(inf_only["std"])


def test_empty_tensors_count_zero_and_reduce_to_nan():
    kinds = [*SCALARS, "samples", "fingerprint", "delta_l2", "row_range", "col_range", "outside(-1,1)", "quantile(5)",
             "unit_active", "unit_outside(-1,1)", "channel_count", "channel_mean", "channel_std", "sample_fingerprints"]  # fmt: skip
    out = st.compute(np.zeros((0, 3), dtype=np.float32), kinds, previous=np.zeros((0, 3)))
    zeros = {"count", "nan_count", "inf_count", "samples", "fingerprint"}
    for key, value in out.items():
        if key in zeros:
            assert value == 0, key
        elif np.ndim(value) == 0:
            assert math.isnan(value), key
    np.testing.assert_array_equal(out["unit_active"], [0, 0, 0])
    np.testing.assert_array_equal(out["channel_count"], [0, 0, 0])
    assert np.isnan(out["channel_mean"]).all() and out["sample_fingerprints"].shape == (0,)


def test_samples_delta_and_row_ranges():
    w = RNG.standard_normal((4, 6))
    prev = w + 0.01 * RNG.standard_normal((4, 6))
    out = st.compute(w, ["samples", "delta_l2", "row_range", "col_range"], previous=prev)
    assert out["samples"] == 4 and st.compute(np.float32(3.0), ["samples"])["samples"] == 1
    assert out["delta_l2"] == pytest.approx(np.linalg.norm(w - prev))
    assert out["row_range"] == pytest.approx(np.max(w.max(1) - w.min(1)))
    assert out["col_range"] == pytest.approx(np.max(w.max(0) - w.min(0)))
    assert math.isnan(st.compute(w, ["delta_l2"])["delta_l2"])  # the first time
    assert math.isnan(st.compute(w, ["delta_l2"], previous=prev[:2])["delta_l2"])  # the shape changed
    constant_rows = np.repeat(RNG.standard_normal((4, 1)), 6, axis=1)  # each neuron: one repeated weight
    same_rows = np.repeat(RNG.standard_normal((1, 6)), 4, axis=0)  # every neuron the same
    assert st.compute(constant_rows, ["row_range"])["row_range"] == 0
    assert st.compute(same_rows, ["col_range"])["col_range"] == 0
    assert st.compute(w, ["row_range"])["row_range"] > 0


def test_quantiles_of_small_tensors_are_numpys_percentiles():
    x = RNG.standard_normal((30, 40))
    out = st.compute(x, ["quantile(5)", "quantile(95)", "quantile(0)", "quantile(100)", "quantile(50)"])
    for q in (5, 95, 0, 100, 50):
        assert out[f"quantile({float(q)})"] == pytest.approx(np.percentile(x, q), rel=1e-12)
    assert st.compute(np.array([np.inf, np.inf, 1.0]), ["quantile(90)"])["quantile(90.0)"] == math.inf


def test_subsample_of_large_tensors_is_fixed_spread_and_close():
    n = 512 * 4096  # a weight whose row length divides n / 4096
    idx = st.subsample_index(n)
    assert len(idx) == st.QUANTILE_SAMPLE and idx[0] == 0 and idx[-1] < n and np.all(np.diff(idx) > 0)
    assert len(np.unique(idx % 4096)) > 3000  # spread over the columns, not a few of them
    x = RNG.standard_normal(n).astype(np.float32)
    out = st.compute(x, ["quantile(5)", "quantile(95)"])
    assert out["quantile(5.0)"] == pytest.approx(np.percentile(x, 5), abs=0.1)
    assert out["quantile(95.0)"] - out["quantile(5.0)"] == pytest.approx(2 * 1.645, rel=0.05)
    np.testing.assert_array_equal(st.subsample_index(10), np.arange(10))


def test_fingerprint_is_the_definition_and_sees_bits_not_order():
    x = np.array([1.5, -2.0, 0.0], dtype=np.float32)
    words = x.view(np.uint32).tolist()
    expected = sum(((st.A * w + st.B) % st.P) ** 2 for w in words) % st.P
    assert st.fingerprint(x) == expected
    assert st.fingerprint(x.view(np.int32)) == expected  # the same bits, whatever the dtype's name
    assert st.fingerprint(x[::-1].copy()) == expected  # a multiset hash
    y = x.copy()
    y[0] = np.nextafter(y[0], np.float32(2))  # one ulp
    assert st.fingerprint(y) != expected
    assert st.fingerprint(np.array([-0.0], np.float32)) != st.fingerprint(np.array([0.0], np.float32))
    d = np.array([2.0**40 + 3], dtype=np.float64)
    lo, hi = int(d.view(np.uint64)[0]) & 0xFFFFFFFF, int(d.view(np.uint64)[0]) >> 32
    assert (
        st.fingerprint(d)
        == (((st.A * lo + st.B) % st.P) ** 2 + ((st.A_HI * hi + st.B_HI) % st.P) ** 2) % st.P
    )
    big = RNG.standard_normal(100_000).astype(np.float32)
    assert 0 <= st.fingerprint(big) < st.P and st.fingerprint(np.zeros(0, np.float32)) == 0
    rows = st.compute(big.reshape(100, 1000), ["sample_fingerprints"])["sample_fingerprints"]
    assert rows.dtype == np.int32 and rows[7] == st.sample_fingerprint(big.reshape(100, 1000)[7])


def test_a_sample_fingerprint_sees_positions():
    """A sample's fingerprint hashes each word with its element's position: a flipped image,
    a one-hot row with its one elsewhere, hash apart (the tensor's `fingerprint` does not)."""
    x = np.array([1.5, -2.0, 0.0], dtype=np.float32)
    words = x.view(np.uint32).tolist()
    expected = sum(((st.A * w + st.B + st.C * j) % st.P) ** 2 for j, w in enumerate(words)) % st.P
    assert st.sample_fingerprint(x) == expected
    assert st.sample_fingerprint(x[::-1].copy()) != expected
    image = RNG.standard_normal((3, 8, 8)).astype(np.float32)
    assert st.sample_fingerprint(image[:, :, ::-1].copy()) != st.sample_fingerprint(image)
    assert st.fingerprint(image[:, :, ::-1].copy()) == st.fingerprint(image)  # a multiset hash
    one_hot = np.eye(4, dtype=np.float32)
    rows = st.compute(one_hot, ["sample_fingerprints"])["sample_fingerprints"]
    assert len(set(rows.tolist())) == 4
    d = np.array([2.0**40 + 3, 1.0], dtype=np.float64)  # both words of a 64-bit element, each at its place
    bits = d.view(np.uint64).tolist()
    want = (
        sum(
            ((st.A * (b & 0xFFFFFFFF) + st.B + st.C * j) % st.P) ** 2
            + ((st.A_HI * (b >> 32) + st.B_HI + st.C * j) % st.P) ** 2
            for j, b in enumerate(bits)
        )
        % st.P
    )
    assert st.sample_fingerprint(d) == want


# vectors --------------------------------------------------------------------------------------
def test_unit_activity_of_a_dense_layer_is_the_rules_unit_fraction():
    x = np.maximum(RNG.standard_normal((32, 10)), 0)
    x[:, 3] = 0  # a dead unit
    out = st.compute(x, ["unit_active"])
    counts, samples = unit_fraction(x > 0)
    np.testing.assert_array_equal(out["unit_active"], counts)
    assert (
        out["samples"] == samples == 32
        and out["unit_active"][3] == 0
        and out["unit_active"].dtype == np.int32
    )


def test_unit_activity_of_a_conv_layer_counts_samples_per_channel():
    x = RNG.standard_normal((5, 4, 3, 3))
    x[:, 1] = -1.0  # channel 1 never fires
    x[2, 2] = -1.0  # channel 2 silent in sample 2 only
    x[0, 0, 0, 0] = np.nan  # NaN makes the sample's max NaN: not active
    out = st.compute(x, ["unit_active"])
    expected = [sum(bool(np.max(x[n, c]) > 0) for n in range(5)) for c in range(4)]
    np.testing.assert_array_equal(out["unit_active"], expected)
    assert out["unit_active"][1] == 0 and out["unit_active"][2] == 4
    channels_last = np.moveaxis(x, 1, -1)
    np.testing.assert_array_equal(
        st.compute(channels_last, ["unit_active"], unit_axis=-1)["unit_active"], expected
    )
    seq = RNG.standard_normal((4, 7, 3))  # (N, T, F): units are the features
    np.testing.assert_array_equal(
        st.compute(seq, ["unit_active"])["unit_active"], (seq.max(axis=1) > 0).sum(axis=0)
    )
    np.testing.assert_array_equal(st.compute(np.array([1.0, -1, 2]), ["unit_active"])["unit_active"], [2])


def test_unit_saturation_counts_elements_and_matches_the_rule_for_dense_layers():
    x = RNG.standard_normal((40, 6)) * 10
    out = st.compute(x, ["unit_outside(-9.4999,9.4999)"])
    counts, _ = unit_fraction((x < -9.4999) | (x > 9.4999))
    np.testing.assert_array_equal(out["unit_outside(-9.4999,9.4999)"], counts)
    assert out["count"] == 240  # the denominator: count / units elements per unit
    img = RNG.standard_normal((3, 2, 4, 4)) * 10
    got = st.compute(img, ["unit_outside(-5,5)"])["unit_outside(-5.0,5.0)"]
    np.testing.assert_array_equal(got, [np.count_nonzero(np.abs(img[:, c]) >= 5) for c in range(2)])


def test_channel_moments_skip_non_finite_values_and_merge_exactly():
    a = RNG.standard_normal((6, 3, 4, 4)) * [[[[1.0]], [[10.0]], [[0.1]]]] + 5
    a[0, 0, 0, 0] = np.nan
    b = RNG.standard_normal((9, 3, 4, 4))
    sa = st.compute(a, ["channel_count", "channel_mean", "channel_std"])
    for c in range(3):
        v = a[:, c][np.isfinite(a[:, c])]
        assert sa["channel_count"][c] == v.size
        assert sa["channel_mean"][c] == pytest.approx(v.mean()) and sa["channel_std"][c] == pytest.approx(
            v.std()
        )
    assert sa["samples"] == 6
    sb = st.compute(b, ["channel_count", "channel_mean", "channel_std"])
    n, mean, std = st.merge_moments(
        (sa["channel_count"], sa["channel_mean"], sa["channel_std"]),
        (sb["channel_count"], sb["channel_mean"], sb["channel_std"]),
    )
    both = np.concatenate([a, b])
    for c in range(3):
        v = both[:, c][np.isfinite(both[:, c])]
        assert n[c] == v.size and mean[c] == pytest.approx(v.mean()) and std[c] == pytest.approx(v.std())
    tabular = st.compute(RNG.standard_normal((20, 7)), ["channel_mean"])["channel_mean"]
    assert tabular.shape == (7,)
    nothing = st.merge_moments((np.zeros(1), np.full(1, np.nan), np.full(1, np.nan)), (np.zeros(1),) * 3)
    assert nothing[0][0] == 0 and np.isnan(nothing[1][0])


# classes --------------------------------------------------------------------------------------
def test_class_statistics_of_logits_match_sklearn_and_the_rules_ids():
    y = RNG.integers(0, 5, 200)
    logits = RNG.standard_normal((200, 5)) + 2 * np.eye(5)[y]
    on_labels, on_preds = st.class_statistics(y, logits)
    p = logits.argmax(1)
    np.testing.assert_array_equal(p, predicted_ids(logits, y.shape))
    np.testing.assert_array_equal(on_labels["class_counts"], [*np.bincount(y, minlength=5), 0])
    np.testing.assert_array_equal(on_preds["class_counts"], [*np.bincount(p, minlength=5), 0])
    cm = confusion_matrix(y, p, labels=range(5))
    np.testing.assert_array_equal(on_labels["confusion"], cm)
    np.testing.assert_array_equal(on_labels["class_correct"], [*np.diag(cm), 0])
    assert on_labels["confusion"].dtype == np.int32


def test_class_statistics_layouts():
    # one-hot labels, as the rules read them
    y = RNG.integers(0, 4, 50)
    one_hot = np.eye(4, dtype=np.float32)[y]
    on_labels, _ = st.class_statistics(one_hot, RNG.standard_normal((50, 4)))
    np.testing.assert_array_equal(on_labels["class_counts"][:4], np.bincount(label_ids(one_hot), minlength=4))
    # segmentation: (N, H, W) labels, (N, C, H, W) logits
    seg = RNG.integers(0, 3, (2, 4, 4))
    logits = RNG.standard_normal((2, 3, 4, 4))
    on_labels, on_preds = st.class_statistics(seg, logits)
    np.testing.assert_array_equal(
        on_preds["class_counts"][:3], np.bincount(logits.argmax(1).ravel(), minlength=3)
    )
    assert on_labels["confusion"].sum() == 32
    # binary: one logit, or probabilities
    yb = RNG.integers(0, 2, (30, 1)).astype(np.float32)
    _, logit = st.class_statistics(yb, RNG.standard_normal((30, 1)) - 5)
    _, prob = st.class_statistics(yb, np.full((30, 1), 0.7))
    assert logit["class_counts"].tolist() == [30, 0, 0] and prob["class_counts"].tolist() == [0, 30, 0]
    # ignore_index and non-integer labels land in the last bucket, out of the confusion matrix
    yi = np.array([0, 1, -100, 2])
    on_labels, _ = st.class_statistics(yi, np.eye(3)[[0, 1, 1, 2]])
    assert on_labels["class_counts"].tolist() == [1, 1, 1, 1] and on_labels["confusion"].sum() == 3
    yf = np.array([0.0, 1.5, np.nan, 2.0])
    assert st.class_statistics(yf, np.eye(3)[[0, 1, 1, 2]])[0]["class_counts"].tolist() == [1, 0, 1, 2]
    # integer predictions: C from `classes`, or the largest id seen
    on_labels, on_preds = st.class_statistics(np.array([0, 1, 5]), np.array([0, 2, 5]))
    assert len(on_preds["class_counts"]) == 7 and on_labels["class_correct"].tolist() == [1, 0, 0, 0, 0, 1, 0]
    assert len(st.class_statistics(np.array([0, 1]), np.array([0, 1]), classes=10)[0]["class_counts"]) == 11


def test_class_statistics_limits():
    y = RNG.integers(0, 100, 300)
    on_labels, on_preds = st.class_statistics(y, RNG.standard_normal((300, 100)))
    assert "confusion" not in on_labels and len(on_labels["class_counts"]) == 101  # 100 > 64 classes
    assert st.class_statistics(y, RNG.standard_normal((300, st.MAX_CLASSES + 1))) == ({}, {})
    on_labels, on_preds = st.class_statistics(None, RNG.standard_normal((10, 3)))
    assert on_labels == {} and on_preds["class_counts"].sum() == 10
    on_labels, on_preds = st.class_statistics(np.array([0, 2, 2]))
    assert on_labels["class_counts"].tolist() == [1, 0, 2, 0] and on_preds == {}
    assert st.class_statistics(np.zeros(0, np.int64)) == ({}, {})
