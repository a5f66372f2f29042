"""`Trial.statistic_columns_of`: the saved scalar statistics of many tensors decoded together
(one pass over each segment for all of them) equal, value for value, what
`Trial.statistic_columns` decodes tensor by tensor and what each `Record` carries, over a run
whose records saved different statistics at different steps (evaluation steps, parametric
keys numbered per segment, a code twice in a record) across several segments."""

from __future__ import annotations

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.trial import columns as columns_module
from mldbg.trial.columns import gather_statistics, scatter_statistics

# per step, per tensor: the statistics saved (a tensor absent at a step has no record there)
KEYS = {
    "a": ("mean", "l2", "nan_count"),
    "b": ("mean", "zero_fraction", "outside(-1.0,1.0)"),
    "c": ("l2",),
}


def _statistics(step: int, mode: mldbg.Mode) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name, keys in KEYS.items():
        if name == "c" and step % 3 == 1:
            continue  # no record of c at these steps
        if mode == mldbg.Mode.EVAL:
            keys = keys[:1]  # evaluation steps save fewer statistics
        elif step % 4 == 0:
            keys = (*keys, "quantile(5.0)")  # a parametric key, first of its segment: code 64
        values = {k: float(step * 10 + i) + 0.25 for i, k in enumerate(keys)}
        if name == "a" and step == 5:
            values["l2"] = float("nan")  # a NaN saved is a NaN read
        out[name] = values
    return out


def _write(out: str, steps: int = 14) -> None:
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1))
    shapes = {n: ("F32", (3,), ()) for n in KEYS}
    for step in range(steps):
        mode = mldbg.Mode.EVAL if step % 5 == 4 else mldbg.Mode.TRAIN
        rec.start_step(mode)
        stats = _statistics(step, mode)
        rec.save_statistics(lambda s=stats: s, {n: shapes[n] for n in stats}, 64)
        rec.end_step()
        if step % 4 == 3:
            rec.flush()  # a new segment: parametric codes are numbered again
    rec.close()


def test_many_tensors_at_once_equal_one_by_one_and_the_records(tmp_path):
    _write(str(tmp_path))
    trial = mldbg.create_trial(tmp_path)
    assert len({r.index_file for n in KEYS for r in trial.records(n)}) >= 3  # segments
    names = trial.tensor_names()
    assert sorted(names) == sorted(KEYS)
    together = trial.statistic_columns_of({n: 0 for n in names})
    for name in names:
        alone = trial.statistic_columns(name)
        assert sorted(together[name]) == sorted(alone)
        for key in alone:
            np.testing.assert_array_equal(together[name][key], alone[key])
        records = trial.records(name)
        expected_keys = set().union(*(r.statistics.keys() for r in records))
        assert set(together[name]) == expected_keys
        for i, r in enumerate(records):
            for key, column in together[name].items():
                want = r.statistics.get(key, float("nan"))
                assert column[i] == want or (np.isnan(column[i]) and np.isnan(want)), (name, r.step, key)
    # from a position on (a live run's new records), and a tensor asked alone
    some = trial.statistic_columns_of({"a": 5, "c": 0})
    for key, column in trial.statistic_columns("a").items():
        np.testing.assert_array_equal(some["a"][key], column[5:])
    assert trial.statistic_columns_of({"b": len(trial.records("b"))}) == {"b": {}}


def _reference(rows, red_rows, red_codes, red_values, key_of):
    """Record by record, in Python: the last entry of a key in a record wins."""
    out: list[dict[str, float]] = []
    for r in rows.tolist():
        found: dict[str, float] = {}
        for rr, code, value in zip(red_rows.tolist(), red_codes.tolist(), red_values.tolist(), strict=True):
            key = key_of(code)
            if rr == r and key is not None:
                found[key] = value
        out.append(found)
    return out


@pytest.mark.parametrize("group", [1, 1 << 20])  # each segment its own group / one group
@pytest.mark.parametrize("uniform", [True, False])
def test_gather_and_scatter_against_a_python_reference(uniform, group, monkeypatch):
    monkeypatch.setattr(columns_module, "_GROUP_ENTRIES", group)
    rng = np.random.default_rng(0)
    keys = ["k0", "k1", "k2", "k3"]
    segments = []
    for s in range(3):
        if s == 1:  # a segment without statistics
            segments.append((np.zeros(0, np.int32), np.zeros(0, np.uint8), np.zeros(0)))
            continue
        rows, codes = [], []
        for r in range(6):  # rows 4 and 5 have no entries (past the last entry row when s == 2)
            if r >= 4 and s == 2:
                continue
            picked = [0, 1] if uniform else rng.choice([0, 1, 2, 3, 7], size=int(rng.integers(0, 4))).tolist()
            if not uniform and r == 1:
                picked = [2, 2]  # a code twice in a record
            rows += [r] * len(picked)
            codes += picked
        segments.append((np.asarray(rows, np.int32), np.asarray(codes, np.uint8), rng.normal(size=len(rows))))
    lut = np.full(256, -1, dtype=np.int64)
    lut[:4] = np.arange(4)  # code 7: not a key

    def key_of(code: int) -> str | None:
        return keys[code] if code < 4 else None

    # three "tensors": records at (segment, row); the third's segments out of load order
    first = (np.asarray([0, 0, 1, 2, 2, 2]), np.asarray([0, 3, 2, 1, 3, 5]))
    second = (np.asarray([0, 2, 2]), np.asarray([5, 0, 4]))
    third = (np.asarray([2, 0, 2, 0]), np.asarray([0, 5, 3, 1]))
    seg = np.concatenate([first[0], second[0], third[0]])
    row = np.concatenate([first[1], second[1], third[1]])
    got = gather_statistics([6, 3, 4], seg, row, segments, {s: lut for s in range(3)}, keys)
    for i, (tseg, trow) in enumerate((first, second, third)):
        expected: list[dict[str, float]] = []
        for s, r in zip(tseg.tolist(), trow.tolist(), strict=True):
            expected += _reference(np.asarray([r]), *segments[s], key_of)
        present = set().union(*expected)
        assert set(got[i]) == present
        for key in present:
            want = np.asarray([e.get(key, np.nan) for e in expected])
            np.testing.assert_array_equal(got[i][key], want)
        # the per-segment path gives the same
        one: dict[str, np.ndarray] = {}
        for s in np.unique(tseg).tolist():
            dest = np.flatnonzero(tseg == s)
            scatter_statistics(one, len(tseg), dest, trow[dest], *segments[s], key_of)
        assert set(one) == present
        for key in present:
            np.testing.assert_array_equal(one[key], got[i][key])


def test_bad_checksums_is_the_format_s_checksum():
    """`bad_checksums` calls zlib's CRC-32 directly (no frame per record): the very value of
    `mldbg.store.format.checksum`, which the writer stores."""
    from mldbg.store.format import checksum
    from mldbg.trial.columns import bad_checksums

    rng = np.random.default_rng(1)
    pieces = [rng.bytes(int(n)) for n in rng.integers(0, 300, size=50)]
    expected = np.asarray([checksum(p) for p in pieces], dtype=np.uint32)
    assert len(bad_checksums(pieces, expected)) == 0
    expected[[3, 17]] ^= 1
    assert bad_checksums(pieces, expected).tolist() == [3, 17]
