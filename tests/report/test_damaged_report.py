"""`mldbg report` on a damaged run (issue 16): it reports what can be read, names each damaged
file and record in a "Damaged data" section (with what it left out), says so once on stderr
and exits 2; an intact run still exits 0 with no such section. Real runs: a tiny real training,
and runs written by the real Recorder with one index segment per step."""

from __future__ import annotations

import subprocess
import sys
from html import unescape
from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.report.training import render, scalar_by_step
from tests.tiny import train

LOSS = "CrossEntropyLoss_output_0"


def report(run: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mldbg.cli.main", "report", str(run), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def damage(run: Path, name: str, step: int) -> Path:
    """Flip one bit of `name`'s bytes at `step` in its data file; the file."""
    trial = mldbg.create_trial(run)
    _, seg, row = trial.record(name, step)._at
    segment = trial._index._segments[seg]
    offset = segment.columns["offset"].item(row)
    data = run / segment.data_key
    blob = bytearray(data.read_bytes())
    blob[offset] ^= 0x10
    data.write_bytes(bytes(blob))
    return data


def damaged_section(page: str) -> str:
    start = page.index('<section id="damaged">')
    return unescape(page[start : page.index("</section>", start)])


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "run"
    train(path, steps=30, save_interval=5, eval_every=10)
    return path


def test_damaged_values_are_reported_around_and_named(intact, tmp_path):
    run = tmp_path / "run"
    subprocess.run(["cp", "-r", str(intact), str(run)], check=True)
    data = damage(run, LOSS, 5)
    damage(run, "fc1.weight", 10)
    done = report(run, tmp_path / "r.html")
    assert done.returncode == 2, done.stderr
    assert done.stdout.strip() == f"wrote {tmp_path / 'r.html'}"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("mldbg report: error: "), done.stderr
    assert "2 damaged files or records" in lines[0] and "Damaged data" in lines[0]
    assert str(data) in lines[0] and f"'{LOSS}' at step 5: checksum mismatch" in lines[0]
    assert "Traceback" not in done.stderr
    page = (tmp_path / "r.html").read_text()
    section = damaged_section(page)
    assert (
        f"'{LOSS}' at step 5: checksum mismatch" in section and f"left out of the chart of {LOSS}" in section
    )
    assert "'fc1.weight' at step 10: checksum mismatch" in section and str(data) in section
    for kept in ("Loss", "Per-layer health", "Label distribution", "Rule findings"):
        assert f"<h2>{kept}</h2>" in page, kept
    assert "damaged data</td><td>2 files or records" in page  # in the summary
    # the loss chart keeps every other step: the intact run's values, step 5 left out
    clean = scalar_by_step(mldbg.create_trial(intact), LOSS)
    damaged: list[tuple[str, str]] = []
    kept_values = scalar_by_step(mldbg.create_trial(run), LOSS, damaged)
    assert 5 in clean and kept_values == {s: v for s, v in clean.items() if s != 5}
    assert len(damaged) == 1 and str(data) in damaged[0][0]
    with pytest.raises(mldbg.errors.CorruptRecord):  # without `damaged`: raised, as before
        scalar_by_step(mldbg.create_trial(run), LOSS)


def test_an_intact_run_exits_0_without_a_damaged_section(intact, tmp_path):
    done = report(intact, tmp_path / "r.html")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    page = (tmp_path / "r.html").read_text()
    assert 'id="damaged"' not in page and "damaged data" not in page
    assert render(intact).damaged == {}


def recorded(out: Path, steps: int = 4) -> None:
    """A loss and a weight each step, one index segment per step."""
    rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    for s in range(steps):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save("loss", np.float32(1.0 / (s + 1)), rec.plan("loss", ("losses",)))
        rec.save("fc.weight", np.full((3, 4), s, np.float32), rec.plan("fc.weight", ("weights",)))
        rec.end_step()
        rec.flush()
    rec.close()


@pytest.mark.parametrize("kind", ["index", "data"])
def test_a_damaged_index_or_a_missing_data_file_is_named(tmp_path, kind):
    """A damaged index segment is read around (its steps are missing); a missing data file
    leaves its records out. Either way the report is written and names the file."""
    run = tmp_path / "run"
    recorded(run)
    second = sorted((run / "workers" / "worker_0" / kind).glob("*.safetensors"))[1]
    if kind == "index":
        blob = bytearray(second.read_bytes())
        blob[-3] ^= 0x01
        second.write_bytes(bytes(blob))
    else:
        second.unlink()
    done = report(run, tmp_path / "r.html")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(second) in lines[0] and "1 damaged file or record" in lines[0], lines[0]
    page = (tmp_path / "r.html").read_text()
    section = damaged_section(page)
    assert str(second) in section
    assert (
        "skipped when the run was read" if kind == "index" else "left out of the chart of loss"
    ) in section
    assert "<h2>Loss</h2>" in page
    rendered = render(run)  # the Python API: the same, without a warning (the test runs warnings as errors)
    assert list(rendered.damaged) and str(second) in next(iter(rendered.damaged))
