"""The format on disk: safetensors compatibility, corruption, key safety, page cache."""

import glob
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

import mldbg
from mldbg.errors import CorruptRecord, InvalidConfig, StoreError, TensorUnavailable
from mldbg.record.recorder import Recorder
from mldbg.store import LocalStore, MemoryStore, open_store


def record(out, steps=5, names=("a", "b"), **kw):
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"], **kw)
    values = {}
    for s in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        for n in names:
            v = np.random.default_rng(s).standard_normal((3, 4)).astype(np.float32) + len(n)
            values[(n, s)] = v
            rec.save(n, v.copy(), rec.plan(n, ()))
        rec.end_step()
    rec.close()
    return values


def test_files_are_plain_safetensors(tmp_path):
    values = record(tmp_path)
    files = glob.glob(str(tmp_path / "workers/worker_0/*/*.safetensors"))
    assert files
    for f in files:
        safetensors.numpy.load_file(f)
    data = {}
    for f in glob.glob(str(tmp_path / "workers/worker_0/data/*.safetensors")):
        data.update(safetensors.numpy.load_file(f))
    np.testing.assert_array_equal(data["2/b"], values[("b", 2)])


def test_few_files(tmp_path):
    record(tmp_path, steps=200)
    files = glob.glob(str(tmp_path / "workers/worker_0/*/*.safetensors"))
    assert len(files) <= 8  # smdebug: two per step


def test_memory_store_round_trip():
    values = record("memory://rt")
    trial = mldbg.create_trial("memory://rt")
    assert trial.steps() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(trial.tensor("a").value(3), values[("a", 3)])
    assert isinstance(open_store("memory://rt"), MemoryStore)


def test_truncated_data_file_names_the_file(tmp_path):
    record(tmp_path)
    (data,) = glob.glob(str(tmp_path / "workers/worker_0/data/*.safetensors"))
    with open(data, "r+b") as f:
        f.truncate(200)
    trial = mldbg.create_trial(tmp_path)
    with pytest.raises(CorruptRecord, match=r"data/0000000001\.safetensors.*truncated"):
        trial.tensor("b").value(4)


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty"])
def test_corrupt_index_file_names_the_file(tmp_path, damage):
    record(tmp_path)
    (index,) = glob.glob(str(tmp_path / "workers/worker_0/index/*.safetensors"))
    raw = Path(index).read_bytes()
    with open(index, "wb") as f:
        f.write({"truncate": raw[: len(raw) // 2], "garbage": b"\x07" * 64, "empty": b""}[damage])
    with pytest.raises(CorruptRecord, match=r"index/0000000001\.safetensors"):
        mldbg.create_trial(tmp_path)
    with pytest.warns(RuntimeWarning, match="skipping"):
        trial = mldbg.create_trial(tmp_path, on_corrupt="skip")
    assert trial.steps() == [] and trial.corrupt_files


def test_tensor_names_cannot_escape_the_run(tmp_path):
    run = tmp_path / "run"
    # names that read as paths or hold a NUL are refused where they are saved (issue 16)
    for i, refused in enumerate(["../../escape", "/etc/passwd", "a/../../b", "\0nul"]):
        with pytest.raises(InvalidConfig, match="name"):
            record(tmp_path / f"refused{i}", steps=2, names=[refused])
    evil = ["..\\..\\x", "a/..b/..c"]  # odd, but no path: kept as names
    values = record(run, steps=2, names=evil)
    outside = [p for p in tmp_path.rglob("*") if not str(p).startswith((str(run), str(tmp_path / "refused")))]
    assert outside == []
    trial = mldbg.create_trial(run)
    assert sorted(trial.tensor_names()) == sorted(evil)
    for n in evil:
        np.testing.assert_array_equal(trial.tensor(n).value(1), values[(n, 1)])
    store = LocalStore(run)
    for bad in ["../x", "/abs", "a/../../b", "a\\b", ""]:
        with pytest.raises(StoreError):
            store.write(bad, [b"x"])


def test_unknown_tensor_error_is_helpful(tmp_path):
    record(tmp_path)
    trial = mldbg.create_trial(tmp_path)
    with pytest.raises(TensorUnavailable, match="no tensor 'nope'"):
        trial.tensor("nope")


def test_import_without_frameworks():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch','tensorflow','keras','jax','xgboost','boto3'):\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import mldbg, mldbg.trial, mldbg.record.recorder, mldbg.store, mldbg.config\n"
        "print(mldbg.create_trial, mldbg.Mode.TRAIN)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_concurrent_writer_and_reader_threads(tmp_path):
    """A reader thread refreshing while the writer writes never sees a partial record."""
    stop = threading.Event()
    errors = []

    def read():
        trial = mldbg.create_trial(tmp_path)
        while not stop.is_set():
            trial.refresh()
            for s in trial.steps():
                try:
                    trial.tensor("a").value(s)
                except Exception as e:  # pragma: no cover - the assertion reports it
                    errors.append(e)

    t = threading.Thread(target=read)
    t.start()
    record(tmp_path, steps=50, flush_seconds=0.001)
    stop.set()
    t.join()
    assert errors == []


def _cached_fraction(path: Path) -> float:
    """The fraction of `path`'s pages in the page cache, by mmap(2) + mincore(2)."""
    import ctypes
    import mmap

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_long,
    ]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    with open(path, "rb") as f:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
        assert addr not in (None, ctypes.c_void_p(-1).value), ctypes.get_errno()
        try:
            vec = ctypes.create_string_buffer(pages)
            assert libc.mincore(addr, size, vec) == 0, ctypes.get_errno()
        finally:
            libc.munmap(addr, size)
    return sum(b & 1 for b in vec.raw) / pages


def _disk_dir() -> Path:
    """A folder on a disk-backed filesystem (tmpfs keeps every page in memory by design)."""
    return Path(__file__).resolve().parents[2] / ".pytest_cache"


@pytest.mark.skipif(sys.platform != "linux", reason="mincore(2) and posix_fadvise are Linux calls here")
def test_large_files_leave_the_page_cache_small_ones_stay():
    import tempfile

    _disk_dir().mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=_disk_dir()) as d:
        store = LocalStore(d)
        big = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)  # 4 MiB
        store.write("data/big", [b"head", memoryview(big)])
        store.write("index/small", [b"x" * 5000])
        assert _cached_fraction(Path(d) / "data/big") < 0.5
        assert _cached_fraction(Path(d) / "index/small") == 1.0
        assert store.read("data/big") == b"head" + big.tobytes()  # still whole, read from disk
        kept = LocalStore(d, drop_cache=False)
        kept.write("data/kept", [memoryview(big)])
        assert _cached_fraction(Path(d) / "data/kept") == 1.0


def test_local_store_makes_a_removed_folder_again(tmp_path):
    """`write` makes a folder once, not at every write; one removed since (a user cleaning up
    a run being written) is made again, and nothing is left behind when a folder cannot be."""
    import shutil

    store = LocalStore(tmp_path / "run")
    store.write("worker_0/a/one", [b"1"])
    store.write("worker_0/a/two", [b"2"])
    assert store.read("worker_0/a/two") == b"2"
    shutil.rmtree(tmp_path / "run" / "worker_0")
    store.write("worker_0/a/three", [b"3"])
    assert store.read("worker_0/a/three") == b"3"
    assert sorted(store.list("worker_0")) == ["worker_0/a/three"]
    (tmp_path / "run" / "blocked").write_bytes(b"a file where a folder should be")
    with pytest.raises(StoreError, match="cannot write"):
        store.write("blocked/x", [b"x"])
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["blocked", "worker_0"]


def test_index_statistics_of_records_sharing_their_keys():
    """The index finds the codes of a set of statistics keys once and reuses them for the
    records that share it: each record keeps its own values, a key naming a statistic already
    given (`quantile(5.0)` after `quantile(5)`) is stored once (the first), and a record with
    reductions as well keeps its reduction's value for a statistic both name."""
    from mldbg.store.format import Record, decode_index, encode_index

    keys = {"mean": 0.0, "l2": 0.0, "quantile(5)": 0.0, "quantile(5.0)": 0.0, "quantile(95)": 0.0}
    records = [
        Record(
            f"w{i}", 3, 1, 3, None, "F32", (2, 2), statistics={k: 10.0 * i + j for j, k in enumerate(keys)}
        )
        for i in range(4)
    ]
    records.append(
        Record(
            "r",
            3,
            1,
            3,
            None,
            "F32",
            (2,),
            reductions={("mean", False): -1.0},
            statistics={"mean": 5.0, "l2": 6.0},
        )
    )
    blob = b"".join(bytes(p) for p in encode_index(records, [-1] * len(records), "worker_0", "d"))
    index = decode_index(blob, "i")
    rows, codes, values = (index.columns[k].tolist() for k in ("red_row", "red_code", "red_value"))
    got: dict[int, dict[str, float]] = {}
    for row, code, value in zip(rows, codes, values, strict=True):
        got.setdefault(row, {})[index.codes.key(code)] = value
    for i in range(4):
        want = {
            "mean": 10.0 * i,
            "l2": 10.0 * i + 1,
            "quantile(5.0)": 10.0 * i + 2,
            "quantile(95.0)": 10.0 * i + 4,
        }
        assert got[i] == want  # keys as the code table spells them
    assert got[4] == {"mean": -1.0, "l2": 6.0}
