"""create_trial opens a SageMaker Debugger / smdebug output directory, read-only.

tests/data/smdebug_run/run was written by the real smdebug 1.0.34 (PyTorch hook: weights,
biases, gradients saved raw and as reductions, ReLU outputs as reductions only, the loss;
TRAIN and EVAL steps), and reference.npz / reference.json hold what smdebug's own trial
returned for it: tests/data/make_smdebug_run.py made both, in smdebug's environment
(`.bench-venvs/smdebug`). When that environment exists, one test records a fresh run with
it and compares again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from tests.tiny import train

import mldbg
import mldbg.rules
from mldbg.config import Mode
from mldbg.errors import CorruptRecord, StoreError, TensorUnavailableForStep
from mldbg.store import open_store
from mldbg.trial.smdebug import SmdebugStore, is_smdebug_run, tfrecord
from mldbg.trial.smdebug import store as smdebug_store

DATA = Path(__file__).resolve().parents[1] / "data" / "smdebug_run"
SHAPES = Path(__file__).resolve().parents[1] / "data" / "smdebug_run_shapes"
ROOT = Path(__file__).resolve().parents[2]
SMDEBUG_PYTHON = ROOT / ".bench-venvs" / "smdebug" / "bin" / "python"


def compare_with_reference(path: str, out: Path) -> None:
    """Everything smdebug's trial returned (reference.json, reference.npz in `out`) equals
    what mldbg's trial reads from `path`."""
    ref = json.loads((out / "reference.json").read_text())
    values = np.load(out / "reference.npz")
    trial = mldbg.create_trial(path)
    assert isinstance(trial.store, SmdebugStore)
    assert trial.tensor_names() == ref["tensor_names"]
    assert trial.steps() == ref["steps"]
    for name, steps in ref["steps_by_mode"].items():
        assert trial.steps(mode=Mode[name]) == steps, name
    assert {str(s): trial.mode(s).name for s in trial.steps()} == ref["modes"]
    assert {str(s): trial.mode_step(s) for s in trial.steps()} == ref["mode_steps"]
    assert trial.workers() == ref["workers"]
    held = {c: names for c, names in ref["collections"].items() if names}
    assert trial.collections() == held
    for name, steps in ref["tensor_steps"].items():
        assert trial.tensor(name).steps() == steps, name
    for key, shape in ref["shapes"].items():  # saved with save_shape=True
        name, step = key.rsplit("|", 1)
        assert trial.record(name, int(step)).shape == tuple(shape), key
    assert len(values.files) > 10
    for key in values.files:
        name, step = key.rsplit("|", 1)
        got = trial.tensor(name).value(int(step))
        want = values[key]
        assert got.dtype == want.dtype and got.shape == want.shape, key
        np.testing.assert_array_equal(got, want, err_msg=key)
    assert len(ref["reductions"]) > 10
    saved = 0
    for key, want in ref["reductions"].items():
        name, step, red, is_abs = key.split("|")
        wanted = (red, bool(int(is_abs)))
        got = trial.tensor(name).reduction_value(int(step), red, abs=wanted[1])
        if wanted in trial.record(name, int(step)).reductions:
            saved += 1  # what smdebug's hook saved: the very number
            assert got == pytest.approx(want, rel=1e-6, abs=1e-9), key
        elif red in ("l1", "l2") and trial.tensor(name).value(int(step)).ndim >= 2:
            # computed from the raw value, smdebug takes a matrix's operator norm
            # (np.linalg.norm(x, ord)), mldbg the norm of its entries, as smdebug's hooks save it
            flat = trial.tensor(name).value(int(step)).astype(np.float64).reshape(-1)
            assert got == pytest.approx(np.linalg.norm(flat, ord=int(red[1])), rel=1e-9), key
        else:
            assert got == pytest.approx(want, rel=1e-5, abs=1e-7), key
    assert saved > 10
    assert trial.loaded_all_steps


@pytest.mark.parametrize("data", [DATA, SHAPES], ids=["mlp", "shapes"])
def test_reads_back_what_smdebug_reads(data: Path) -> None:
    compare_with_reference(str(data / "run"), data)


def test_shapes_scalars_and_predict_steps() -> None:
    trial = mldbg.create_trial(SHAPES / "run")
    assert trial.steps(mode=Mode.PREDICT) and trial.steps(mode=Mode.TRAIN) == [0, 2, 4]
    record = trial.record("gradient/Sequential_0.weight", 2)
    assert not record.has_raw and record.shape == (2, 1, 3, 3) and ("mean", False) in record.reductions
    # smdebug writes a tensor saved after a step's backward with the next step (its trial reads it so)
    assert trial.tensor("my_tensor").value(2).tolist() == [[1, 2, 3], [4, 5, 6]]
    assert trial.tensor("my_tensor").value(2).dtype == np.int64
    # a scalar is written at once (and again with the next step: the last one is read, as smdebug does)
    assert trial.tensor("scalar/my_scalar").value(4) == pytest.approx([6.0])


def test_saved_reductions_and_reductions_only_records() -> None:
    trial = mldbg.create_trial(DATA / "run")
    # ReLU outputs: reductions only, as smdebug saved them (no raw value)
    record = trial.record("relu_output_0", 1)
    assert not record.has_raw
    assert set(record.reductions) == {("min", False), ("max", False), ("mean", False), ("l2", False)}
    with pytest.raises(TensorUnavailableForStep, match="only reductions"):
        trial.tensor("relu_output_0").value(1)
    # gradients: raw and saved reductions, which agree
    grad = trial.record("gradient/Net_fc1.weight", 1)
    assert grad.has_raw and ("max", True) in grad.reductions
    value = trial.read(grad)
    assert grad.reductions[("max", True)] == pytest.approx(float(np.abs(value).max()), rel=1e-6)
    assert trial.tensor_names(collection="gradients", mode=Mode.EVAL) == []
    assert trial.tensor_names(collection="losses", mode=Mode.EVAL) == ["CrossEntropyLoss_output_0"]


def test_default_rules_and_cli_run_on_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "run", run)
    findings = mldbg.check(run)
    assert all(isinstance(f, mldbg.Finding) for f in findings)
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "check", str(run), "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    for line in done.stdout.splitlines():  # diagnoses (their findings inside), and rules that lacked data
        entry = json.loads(line)
        assert set(entry) == {"unchecked", "why"} or (
            set(entry) >= {"cause", "confidence", "findings"}
            and all(set(f) >= {"rule", "step", "mode", "message"} for f in entry["findings"])
        )
    # a rule reads the smdebug gradients (and fires when its threshold says they are small and
    # its learning share counts every change as too small: SGD moves these weights, so with
    # its default share they are learning)
    vanishing = mldbg.rules.BUILTIN["vanishing_gradient"](threshold=10.0, learning_share=1e9)
    fired = mldbg.check(run, rules=[vanishing])
    assert fired and fired[0].rule == "vanishing_gradient"
    assert any(t.startswith("gradient/Net_") for t in fired[0].tensors)
    assert mldbg.check(run, rules=["vanishing_gradient"]) == []
    shown = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "ls", str(run)], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "gradient/Net_fc1.weight" in shown.stdout
    # nothing of smdebug's was changed or added (a watcher's place aside)
    before = sorted(p.relative_to(DATA / "run") for p in (DATA / "run").rglob("*"))
    after = sorted(p.relative_to(run) for p in run.rglob("*") if "watch" not in p.parts)
    assert before == after


def test_read_only(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "run", run)
    store = mldbg.create_trial(run).store
    with pytest.raises(StoreError, match="read-only"):
        store.write("control/stop", [b"{}"])
    with pytest.raises(StoreError, match="read-only"):
        store.delete("workers/worker_0/END")


def test_an_mldbg_run_is_not_taken_for_an_smdebug_run(tmp_path: Path) -> None:
    run = train(tmp_path / "mldbg_run", steps=3).path
    assert not is_smdebug_run(open_store(run))
    assert not isinstance(mldbg.create_trial(run).store, SmdebugStore)


@pytest.mark.parametrize("damage", ["truncate", "length_crc", "payload"])
def test_damaged_event_file_names_it(tmp_path: Path, damage: str) -> None:
    run = tmp_path / "run"
    shutil.copytree(DATA / "run", run)
    event = run / "events" / "000000000003" / "000000000003_worker_0.tfevents"
    blob = bytearray(event.read_bytes())
    if damage == "truncate":
        blob = blob[: len(blob) - 40]
    elif damage == "length_crc":
        blob[9] ^= 0xFF
    else:  # a record with a real payload checksum, then a damaged payload byte
        first = next(iter(tfrecord.records(bytes(blob), "x")))[1].tobytes()
        bad = bytearray(tfrecord.encode(first, checksum=True))
        bad[20] ^= 0xFF
        blob = bad + blob[12 + len(first) + 4 :]
    event.write_bytes(bytes(blob))
    with pytest.raises(CorruptRecord, match="000000000003_worker_0.tfevents"):
        trial = mldbg.create_trial(run)
        trial.tensor("Net_fc1.weight").value(3)
    with pytest.warns(RuntimeWarning, match="000000000003_worker_0.tfevents"):
        trial = mldbg.create_trial(run, on_corrupt="skip")
    assert 3 not in trial.steps() and 4 in trial.steps()


def test_tfrecord_checksums() -> None:
    # CRC-32C check value (RFC 3720) and TensorFlow's masking
    assert tfrecord.crc32c(b"123456789") == 0xE3069283
    framed = tfrecord.encode(b"hello", checksum=True)
    assert [p.tobytes() for _, p in tfrecord.records(framed, "x")] == [b"hello"]
    unchecked = tfrecord.encode(b"hello", checksum=False)
    assert [p.tobytes() for _, p in tfrecord.records(unchecked, "x")] == [b"hello"]


@pytest.fixture(scope="module")
def s3_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.store.s3server import s3_prefix

    with s3_prefix(tmp_path_factory, "smdebug-run") as url:
        store = open_store(url)
        for path in sorted((DATA / "run").rglob("*")):
            if path.is_file():
                store.write(path.relative_to(DATA / "run").as_posix(), [path.read_bytes()])
        store.close()
        yield url


def test_reads_an_smdebug_run_in_a_bucket(s3_run: str) -> None:
    compare_with_reference(s3_run, DATA)


@pytest.mark.skipif(
    not SMDEBUG_PYTHON.exists(), reason="smdebug's environment: benchmarks/run_all.py --setup"
)
@pytest.mark.parametrize("variant", [[], ["--shapes"]], ids=["mlp", "shapes"])
def test_a_fresh_smdebug_run(tmp_path: Path, variant: list[str]) -> None:
    done = subprocess.run(
        [str(SMDEBUG_PYTHON), str(ROOT / "tests" / "data" / "make_smdebug_run.py"), str(tmp_path), *variant],
        capture_output=True, text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    compare_with_reference(str(tmp_path / "run"), tmp_path)


def test_report_and_dashboard_serve_it(tmp_path: Path) -> None:
    from tests.dashboard.helpers import Server, run_url

    runs = tmp_path / "sweep"  # a folder holding an smdebug run is a folder of runs, too
    shutil.copytree(DATA / "run", runs / "smdebug")
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "report", str(runs / "smdebug"), "-o", str(tmp_path / "r.html")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    html = (tmp_path / "r.html").read_text()
    assert "smdebug" in html and "CrossEntropyLoss_output_0" in html  # the loss chart
    trial = mldbg.create_trial(runs / "smdebug")
    with Server(str(runs), log=tmp_path / "server.log") as server:
        body = server.wait_for("api/runs", lambda b: b["runs"] and b["runs"][0]["status"] != "running")
        assert [r["name"] for r in body["runs"]] == ["smdebug"]
        # ReLU outputs: smdebug saved their reductions only; the dashboard reads them
        reduction = server.json(run_url("smdebug") + "/reduction", tensor="relu_output_0", reduction="max")
        tensor = trial.tensor("relu_output_0")
        assert reduction["steps"] == tensor.steps()
        assert reduction["values"] == [tensor.reduction_value(s, "max") for s in tensor.steps()]


def test_a_live_smdebug_run_is_read_as_it_grows(tmp_path: Path) -> None:
    src, run = DATA / "run", tmp_path / "run"
    shutil.copytree(src / "collections", run / "collections")

    def copy_step(step: int, what: tuple[str, ...] = ("events", "index")) -> None:
        for kind in what:
            for path in (src / kind).rglob(f"{step:012d}_*"):
                target = run / path.relative_to(src)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)

    for step in range(6):
        copy_step(step)
    copy_step(6, ("index",))  # its index is there, its event file not yet: not a step yet
    trial = mldbg.create_trial(run)
    assert isinstance(trial.store, SmdebugStore)
    assert trial.steps() == list(range(6)) and not trial.loaded_all_steps
    copy_step(6, ("events",))
    trial.wait_for_steps([6], timeout=10)
    for step in range(7, 12):
        copy_step(step)
    shutil.copy(src / "training_job_end.ts", run / "training_job_end.ts")
    assert trial.loaded_all_steps and trial.steps() == list(range(12))
    want = mldbg.create_trial(src)
    np.testing.assert_array_equal(
        trial.tensor("Net_fc2.weight").value(11), want.tensor("Net_fc2.weight").value(11)
    )


def test_several_workers(tmp_path: Path) -> None:
    # a second worker, as smdebug names its files in a distributed job: the same records
    # under `<step>_worker_1`, its index pointing at its own event files
    run = tmp_path / "run"
    shutil.copytree(DATA / "run", run)
    for index in sorted((run / "index").rglob("*_worker_0.json")):
        doc = json.loads(index.read_text())
        event = run / doc["meta"]["event_file_name"]
        doc["meta"]["event_file_name"] = doc["meta"]["event_file_name"].replace("_worker_0.", "_worker_1.")
        shutil.copy(event, run / doc["meta"]["event_file_name"])
        index.with_name(index.name.replace("_worker_0.", "_worker_1.")).write_text(json.dumps(doc))
    trial = mldbg.create_trial(run)
    assert trial.workers() == ["worker_0", "worker_1"]
    assert trial.tensor("Net_fc1.weight").workers(3) == ["worker_0", "worker_1"]
    np.testing.assert_array_equal(
        trial.tensor("Net_fc1.weight").value(3, worker="worker_1"), trial.tensor("Net_fc1.weight").value(3)
    )
    one = mldbg.create_trial(run, worker="worker_1")
    assert one.workers() == ["worker_1"] and one.steps() == list(range(12)) and one.loaded_all_steps


@pytest.mark.parametrize("data", [DATA, SHAPES], ids=["mlp", "shapes"])
def test_large_event_files_are_read_by_record(
    data: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Past WHOLE_FILE_BYTES an event file is not read whole: each record apart, and a tensor
    larger than HEAD_BYTES only as far as its header, its bytes read from the event file when
    asked for. Made small here, so the runs above take that path: the same values."""
    monkeypatch.setattr(smdebug_store, "WHOLE_FILE_BYTES", 0)
    monkeypatch.setattr(smdebug_store, "HEAD_BYTES", 128)
    compare_with_reference(str(data / "run"), data)
    run = tmp_path / "run"
    shutil.copytree(data / "run", run)
    trial = mldbg.create_trial(run)
    assert isinstance(trial.store, SmdebugStore)
    segment = trial.store._segment("worker_0", 2)
    assert segment.event_size > 0 and b'"2/Net_fc1.weight"' not in segment.side  # its bytes stay in the file
    event = run / "events" / "000000000002" / "000000000002_worker_0.tfevents"
    event.write_bytes(event.read_bytes()[:-300])  # truncated
    with pytest.raises(CorruptRecord, match="000000000002_worker_0.tfevents"):
        mldbg.create_trial(run)


def test_plots_read_it() -> None:
    from mldbg.insight.distribution import distribution, histograms

    figure = distribution(DATA / "run", "gradient/Net_fc1.weight")
    assert len(figure.data) > 0
    steps = mldbg.create_trial(DATA / "run").tensor("Net_fc2.weight").steps()
    assert len(histograms(DATA / "run", "Net_fc2.weight").data) == len(steps)
