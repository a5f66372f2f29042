"""Integrity on read (issue 16): checksums on data and index, every damaged index, meta.json
or END a CorruptRecord naming it (in create_trial too), `on_corrupt="skip"` that reads the rest,
missing segments reported, and data files that any safetensors reader opens.

Runs are written by the real Recorder, one segment per step where segments matter."""

from __future__ import annotations

import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import safetensors
import safetensors.numpy

import mldbg
from mldbg.errors import CorruptRecord, InvalidConfig, MldbgError
from mldbg.record.recorder import Recorder
from mldbg.store import layout
from mldbg.store.format import FORMAT_VERSION, decode_index, reseal_index

W = "workers/worker_0"


def record(out, steps=4, segments=True, names=("a", "b"), scalars=()) -> dict:
    """`a`, `b` raw each step (one segment per step when `segments`), `scalars` saved twice a
    step (after it ended: each save is a record of its own); returns the values by (name, step)."""
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    values = {}
    for s in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        for n in names:
            v = np.random.default_rng(s).standard_normal((3, 4)).astype(np.float32) + len(n)
            values[(n, s)] = v
            rec.save(n, v.copy(), rec.plan(n, ()))
        rec.end_step()
        for n in scalars:
            rec.save_scalar(n, float(s))
            rec.save_scalar(n, float(s) + 0.5)  # the same scalar twice in one step
        if segments:
            rec.flush()
    rec.close()
    return values


def files(run: Path, kind: str) -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(run / W / kind / "*.safetensors")))


def flip(path: Path, bit: int) -> None:
    blob = bytearray(path.read_bytes())
    blob[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(blob))


# checksums ---------------------------------------------------------------------------------
def test_every_bit_flip_in_tensor_bytes_is_a_corrupt_record_naming_file_tensor_and_step(tmp_path):
    values = record(tmp_path, steps=2, segments=False)
    (data,) = files(tmp_path, "data")
    trial = mldbg.create_trial(tmp_path)
    rec = trial.record("b", 1)
    owner, seg, row = rec._at
    c = trial._index._segments[seg].columns
    offset, nbytes = c["offset"].item(row), c["nbytes"].item(row)
    original = data.read_bytes()
    for bit in range(offset * 8, (offset + nbytes) * 8):  # every bit of b at step 1
        blob = bytearray(original)
        blob[bit // 8] ^= 1 << (bit % 8)
        data.write_bytes(bytes(blob))  # in place: the trial's open handle sees it
        with pytest.raises(
            CorruptRecord, match=r"data/0000000001\.safetensors: 'b' at step 1: checksum mismatch"
        ):
            trial.read(rec)
        np.testing.assert_array_equal(trial.tensor("a").value(1), values[("a", 1)])  # the rest reads
    data.write_bytes(original)
    np.testing.assert_array_equal(trial.read(rec), values[("b", 1)])


def test_every_bit_flip_in_an_index_file_is_a_corrupt_record(tmp_path):
    record(tmp_path, steps=2, segments=False, scalars=("loss",))
    (index,) = files(tmp_path, "index")
    blob = index.read_bytes()
    decode_index(blob, "intact")
    for bit in range(len(blob) * 8):
        damaged = bytearray(blob)
        damaged[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(CorruptRecord, match="^damaged: "):
            decode_index(bytes(damaged), "damaged")


def test_a_flipped_index_names_the_file_in_create_trial_and_skip_reads_the_other_segments(tmp_path):
    values = record(tmp_path, steps=3)
    second = files(tmp_path, "index")[1]
    flip(second, 8 * (len(second.read_bytes()) - 3))  # in the last column
    with pytest.raises(CorruptRecord, match=r"index/0000000002\.safetensors: checksum mismatch"):
        mldbg.create_trial(tmp_path)
    with pytest.warns(RuntimeWarning, match=r"skipping .*index/0000000002\.safetensors"):
        trial = mldbg.create_trial(tmp_path, on_corrupt="skip")
    assert trial.steps() == [0, 2]
    np.testing.assert_array_equal(trial.tensor("a").value(2), values[("a", 2)])
    assert len(trial.corrupt_files) == 1


def test_a_corrupt_offset_is_not_taken_for_a_reductions_only_record(tmp_path):
    record(tmp_path, steps=1, segments=False)
    (index,) = files(tmp_path, "index")
    blob = bytearray(index.read_bytes())
    (n,) = struct.unpack("<Q", blob[:8])
    start, _ = json.loads(blob[8 : 8 + n])["offset"]["data_offsets"]
    blob[8 + n + start : 8 + n + start + 8] = struct.pack("<q", -7)  # no file offset is -7
    index.write_bytes(reseal_index(bytes(blob)))  # a checksum that fits: the values are checked too
    with pytest.raises(CorruptRecord, match=r"index/0000000001\.safetensors: offsets or lengths"):
        mldbg.create_trial(tmp_path)
    blob[8 + n + start : 8 + n + start + 8] = struct.pack("<q", -1)  # -1, but with bytes to read
    index.write_bytes(reseal_index(bytes(blob)))
    with pytest.raises(CorruptRecord, match="an offset is -1 only for a record without raw bytes"):
        mldbg.create_trial(tmp_path)


def test_index_files_say_format_3_and_carry_their_checksum(tmp_path):
    record(tmp_path, steps=1)
    (index,) = files(tmp_path, "index")
    with safetensors.safe_open(str(index), "numpy") as f:
        meta = f.metadata()
        assert set(f.keys()) >= {"crc", "offset", "nbytes"}
        crc = f.get_tensor("crc")
    assert json.loads(meta["mldbg"])["format"] == FORMAT_VERSION == 3
    assert len(meta["crc32"]) == 8 and int(meta["crc32"], 16) >= 0
    assert crc.dtype == np.uint32 and crc.all()


# damaged markers ---------------------------------------------------------------------------
DAMAGE = {
    "empty": b"",
    "truncated": b'{"worker": "worker_0", "ra',
    "garbage": bytes(range(256)),
    "not an object": b"[1, 2, 3]",
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "huge number": b'{"last_step": 1' + b"0" * 400 + b', "expected_workers": 1' + b"0" * 30 + b"}",
    "wrong types": b'{"rank": "zero", "last_step": [], "stopped": "yes", "expected_workers": {}}',
    "not a time": b'{"started": NaN, "ended": Infinity}',
    "out of range": b'{"pid": -5, "world_size": 0, "expected_workers": 0, "last_step": 99999999999999999999}',
    "huge float": b'{"started": 1e999, "ended": 1e999}',
}


@pytest.mark.parametrize("marker", ["meta.json", "END"])
@pytest.mark.parametrize("damage", [*DAMAGE, "a folder"])
def test_a_damaged_marker_is_a_corrupt_record_naming_it_and_skip_reads_the_run(tmp_path, marker, damage):
    values = record(tmp_path, steps=2)
    path = tmp_path / W / marker
    path.unlink()
    if damage == "a folder":
        path.mkdir()
    else:
        path.write_bytes(DAMAGE[damage])
    with pytest.raises(CorruptRecord, match=rf"worker_0/{marker}"):
        mldbg.create_trial(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"skipping .*worker_0/{marker}"):
        trial = mldbg.create_trial(tmp_path, on_corrupt="skip")
        assert trial.steps() == [0, 1]
        np.testing.assert_array_equal(trial.tensor("b").value(1), values[("b", 1)])
        assert trial.loaded_all_steps == (marker != "END")  # a damaged END: the end is not known


def test_damaged_index_files_of_every_kind_are_corrupt_records(tmp_path):
    record(tmp_path, steps=2, segments=False)
    (index,) = files(tmp_path, "index")
    intact = index.read_bytes()
    (n,) = struct.unpack("<Q", intact[:8])
    header = json.loads(intact[8 : 8 + n])

    def with_header(h: dict, seal: bool = True) -> bytes:
        text = json.dumps(h, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        blob = struct.pack("<Q", len(text)) + text + intact[8 + n :]
        return reseal_index(blob) if seal else blob

    meta = json.loads(header["__metadata__"]["mldbg"])
    variants = {
        "empty": b"",
        "8 bytes": intact[:8],
        "huge header length": struct.pack("<Q", 1 << 40) + intact[8:],
        "garbage": os.urandom(4096),
        "deep nesting": struct.pack("<Q", 200_000) + b"[" * 100_000 + b"]" * 100_000,
        "no checksum": with_header(
            {k: v for k, v in header.items() if k != "__metadata__"}
            | {"__metadata__": {"mldbg": header["__metadata__"]["mldbg"]}},
            seal=False,
        ),
        "names not a list": with_header(
            header | {"__metadata__": header["__metadata__"] | {"mldbg": json.dumps(meta | {"names": "ab"})}}
        ),
        "name id out of range": with_header(
            header | {"__metadata__": header["__metadata__"] | {"mldbg": json.dumps(meta | {"names": ["a"]})}}
        ),
        "collections wrong": with_header(
            header
            | {
                "__metadata__": header["__metadata__"]
                | {"mldbg": json.dumps(meta | {"collections": {"all": [7]}})}
            }
        ),
        "format from the future": with_header(
            header | {"__metadata__": header["__metadata__"] | {"mldbg": json.dumps(meta | {"format": 99})}}
        ),
        "format not a number": with_header(
            header | {"__metadata__": header["__metadata__"] | {"mldbg": json.dumps(meta | {"format": "3"})}}
        ),
        "statistics wrong": with_header(
            header
            | {"__metadata__": header["__metadata__"] | {"mldbg": json.dumps(meta | {"statistics": ["x"]})}}
        ),
        "column missing": with_header({k: v for k, v in header.items() if k != "crc"}),
        "column past the end": with_header(
            header | {"step": header["step"] | {"data_offsets": [0, 1 << 40], "shape": [1 << 37]}}
        ),
        "column of the wrong dtype": with_header(header | {"step": header["step"] | {"dtype": "F32"}}),
        "column offsets reversed": with_header(
            header | {"step": header["step"] | {"data_offsets": header["step"]["data_offsets"][::-1]}}
        ),
        "column offsets of bools": with_header(
            header | {"step": header["step"] | {"data_offsets": [True, False]}}
        ),
    }
    for name, blob in variants.items():
        index.write_bytes(blob)
        with pytest.raises(CorruptRecord, match=r"index/0000000001\.safetensors") as err:
            mldbg.create_trial(tmp_path)
        assert "\n" not in str(err.value), name
        with pytest.warns(RuntimeWarning, match="skipping"):
            assert mldbg.create_trial(tmp_path, on_corrupt="skip").steps() == [], name
    shutil.rmtree(index.parent)
    index.parent.write_bytes(b"a file where the index folder should be")
    with pytest.raises(CorruptRecord, match="END says segment 1 is the last"):
        mldbg.create_trial(tmp_path)  # nothing listed, but END counts the segment written


def test_a_folder_in_place_of_a_data_file_is_a_corrupt_record(tmp_path):
    record(tmp_path, steps=2, segments=False)
    (data,) = files(tmp_path, "data")
    data.unlink()
    data.mkdir()
    trial = mldbg.create_trial(tmp_path)
    with pytest.raises(CorruptRecord, match=r"data/0000000001\.safetensors: cannot be read .*'a' at step 1"):
        trial.tensor("a").value(1)


def test_workers_as_a_file_is_a_corrupt_record(tmp_path):
    (tmp_path / "workers").write_bytes(b"x")
    with pytest.raises(CorruptRecord, match="workers/: not a folder"):
        mldbg.create_trial(tmp_path)


# gaps ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("missing", [1, 2, 3])
def test_a_missing_segment_is_reported_and_skip_reads_around_it(tmp_path, missing):
    values = record(tmp_path, steps=4)
    (tmp_path / layout.index_key("worker_0", missing)).unlink()
    with pytest.raises(
        CorruptRecord, match=rf"index/{missing:010d}\.safetensors: missing; segment {missing + 1} follows"
    ):
        mldbg.create_trial(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"{missing:010d}\.safetensors: missing"):
        trial = mldbg.create_trial(tmp_path, on_corrupt="skip")
    assert trial.steps() == [s for s in range(4) if s != missing - 1]
    for s in trial.steps():
        np.testing.assert_array_equal(trial.tensor("a").value(s), values[("a", s)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trial.refresh()  # warned once, not at every refresh


@pytest.mark.parametrize("deleted", [(4,), (3, 4)], ids=["the newest", "the two newest"])
def test_the_newest_segments_missing_are_reported_from_end(tmp_path, deleted):
    """No later segment shows the gap: END names the worker's last segment."""
    values = record(tmp_path, steps=4)
    for seq in deleted:
        (tmp_path / layout.index_key("worker_0", seq)).unlink()
    with pytest.raises(
        CorruptRecord, match=rf"{deleted[0]:010d}\.safetensors: missing.*END says segment 4 is the last"
    ):
        mldbg.create_trial(tmp_path)
    with pytest.warns(RuntimeWarning, match="END says segment 4 is the last"):
        trial = mldbg.create_trial(tmp_path, on_corrupt="skip")
    assert trial.steps() == list(range(deleted[0] - 1))
    for s in trial.steps():
        np.testing.assert_array_equal(trial.tensor("a").value(s), values[("a", s)])


def test_a_gap_of_several_segments_names_the_first_and_counts_the_rest(tmp_path):
    record(tmp_path, steps=5)
    for seq in (2, 3, 4):
        (tmp_path / layout.index_key("worker_0", seq)).unlink()
    with pytest.raises(
        CorruptRecord, match=r"0000000002\.safetensors: missing \(and 2 more\); segment 5 follows segment 1"
    ):
        mldbg.create_trial(tmp_path)


def test_a_gap_raises_at_every_refresh_of_a_live_trial(tmp_path):
    record(tmp_path, steps=2)
    (tmp_path / W / "END").unlink()  # still being written
    trial = mldbg.create_trial(tmp_path)
    shutil.copy(tmp_path / layout.data_key("worker_0", 2), tmp_path / layout.data_key("worker_0", 4))
    src = (tmp_path / layout.index_key("worker_0", 2)).read_bytes()
    (tmp_path / layout.index_key("worker_0", 4)).write_bytes(src)
    for _ in range(2):
        with pytest.raises(CorruptRecord, match=r"0000000003\.safetensors: missing"):
            trial.refresh()


def test_an_index_pointing_into_another_segments_data_is_a_corrupt_record(tmp_path):
    record(tmp_path, steps=2)
    first, second = files(tmp_path, "index")
    second.write_bytes(first.read_bytes())  # segment 2 would read segment 1's data
    with pytest.raises(CorruptRecord, match=r"0000000002\.safetensors: points into .*0000000001"):
        mldbg.create_trial(tmp_path)


# data files any safetensors reader opens ----------------------------------------------------------
def test_the_same_scalar_twice_in_a_step_opens_in_safetensors(tmp_path):
    names = ("a", "b")
    values = record(tmp_path, steps=3, segments=False, names=names, scalars=("loss", "loss#2"))
    (data,) = files(tmp_path, "data")
    loaded = safetensors.numpy.load_file(str(data))
    with safetensors.safe_open(str(data), "numpy") as f:
        assert sorted(f.keys()) == sorted(loaded)
    np.testing.assert_array_equal(loaded["2/a"], values[("a", 2)])
    # the second save of a step gets the first free `#n`: `loss#2` was taken by the other scalar
    assert [float(loaded[k]) for k in ("1/loss", "1/loss#3", "1/loss#2", "1/loss#2#2")] == [
        1.0,
        1.5,
        1.0,
        1.5,
    ]
    for index in files(tmp_path, "index"):
        safetensors.numpy.load_file(str(index))
    trial = mldbg.create_trial(tmp_path)  # mldbg reads its names as they were given
    assert set(trial.tensor_names()) >= {*names, "loss", "loss#2"}
    loss = trial.records("loss", step=2)
    assert sorted(float(trial.read(r)) for r in loss) == [2.0, 2.5]


@pytest.mark.parametrize("name", ["x\ud800y", "z\udfff"])
def test_a_lone_surrogate_name_is_refused_before_anything_is_written(tmp_path, name):
    """No safetensors reader could open a file keyed by it: the recorder refuses the name
    (the format still escapes one that reaches it, `\\udXXX`, so a file always opens)."""
    with pytest.raises(InvalidConfig, match="lone surrogate"):
        record(tmp_path, steps=1, names=("a", name))


def test_mldbg_check_on_a_damaged_run_exits_2_with_one_line(tmp_path):
    record(tmp_path, steps=2)
    (tmp_path / W / "meta.json").write_bytes(b"\x00garbage")
    proc = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "check", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "worker_0/meta.json" in lines[0] and "Traceback" not in proc.stderr


def test_mldbg_check_over_a_damaged_value_says_so_and_exits_2(tmp_path):
    record(tmp_path, steps=6, segments=False)
    (data,) = files(tmp_path, "data")
    flip(data, (data.stat().st_size - 10) * 8)  # the last tensor's bytes: the index still opens
    proc = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "check", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr  # not 0: the findings leave a step out
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("mldbg check: error:")]
    assert "data/0000000001.safetensors" in line and "checksum mismatch" in line
    assert "Traceback" not in proc.stderr


def test_corrupt_record_is_an_mldbg_error():
    assert issubclass(CorruptRecord, MldbgError)


def test_workers_as_a_file_is_a_corrupt_record_for_one_worker_too(tmp_path):
    (tmp_path / "workers").write_bytes(b"x")
    with pytest.raises(CorruptRecord, match="workers/: not a folder"):
        mldbg.create_trial(tmp_path, worker="worker_1")


@pytest.mark.parametrize(
    "damage",
    [b"", b"\x00\xff", b"[1]", b"[" * 100_000, b'{"num_class": "3"}', b'{"feature_names": [1, 2]}', None],
)
def test_a_damaged_xgboost_description_reads_as_none_with_a_warning(tmp_path, damage, caplog):
    from mldbg.store.run_info import info_key, read_run_info

    record(tmp_path, steps=1)
    path = tmp_path / info_key("worker_0")
    if damage is None:
        path.mkdir()
    else:
        path.write_bytes(damage)
    with caplog.at_level("WARNING", logger="mldbg"):
        assert read_run_info(mldbg.create_trial(tmp_path)) is None
    assert "xgboost.json is damaged" in caplog.text


def test_a_retargeted_index_keeps_a_valid_checksum_and_its_records(tmp_path):
    """S3 numbering rewrites an index to point at another segment's data key: its checksum is
    computed anew, and a damaged index is refused rather than resealed."""
    from mldbg.store.format import retarget_index

    record(tmp_path, steps=2, segments=False, scalars=("loss",))
    (index,) = files(tmp_path, "index")
    blob = index.read_bytes()
    moved = retarget_index(blob, "workers/worker_0/data/0000000007.safetensors", "here")
    before, after = decode_index(blob, "before"), decode_index(moved, "after")
    assert after.data_key.endswith("0000000007.safetensors") and after.format == FORMAT_VERSION
    assert after.names == before.names
    for name, col in before.columns.items():
        np.testing.assert_array_equal(after.columns[name], col)
    damaged = bytearray(blob)
    damaged[-1] ^= 1
    with pytest.raises(CorruptRecord, match="^here: checksum mismatch"):
        retarget_index(bytes(damaged), "workers/worker_0/data/0000000007.safetensors", "here")
