"""benchmarks/calibration.py: the corpus is large enough, split before any result by the
name's hash (stable, about half and half), and two of its pipelines (one healthy, one buggy)
run end to end through the benchmark's worker processes into its records and report. What the
rules decide on them is the benchmark's figure, not asserted here."""

from __future__ import annotations

import hashlib
import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
HEALTHY, BUGGY = "triplet_batch_hard", "tabular_sgd_plain_3layer+dead_relu_init"


@pytest.fixture
def calibration(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("calibration")


def test_corpus_is_split_by_name_about_half_and_half(calibration):
    corpus = calibration.corpus
    everything = corpus.pipelines()
    pipelines = {n: p for n, p in everything.items() if p.split not in corpus.LATER}  # split by name
    healthy = [p for p in pipelines.values() if p.healthy]
    assert len(healthy) >= 60
    for p in pipelines.values():
        assert p.split == ("tune", "heldout")[hashlib.sha1(p.name.encode()).digest()[0] & 1]
        if not p.healthy:
            assert p.twin in pipelines and pipelines[p.twin].healthy and p.expected and p.cause
    for group in (list(pipelines.values()), healthy):
        share = sum(p.split == "tune" for p in group) / len(group)
        assert 0.35 < share < 0.65, share
    assert calibration.select(list(everything), "heldout", "healthy", None) == [
        p.name for p in healthy if p.split == "heldout"
    ]


def test_the_fresh_modules_are_one_held_out_set_of_their_own(calibration, capsys, monkeypatch):
    """Every pipeline of a module with `SPLIT = "fresh"` (and its buggy twins) is in `fresh`,
    whatever its name's hash; no other pipeline is; `--split fresh` lists exactly them."""
    corpus = calibration.corpus
    from corpus import fresh

    pipelines = corpus.pipelines()
    names = {p.name for p in fresh.PIPELINES}
    assert {n for n, p in pipelines.items() if p.split == corpus.FRESH} == names
    healthy = [n for n in names if pipelines[n].healthy]
    buggy = [pipelines[n] for n in names if not pipelines[n].healthy]
    assert len(healthy) >= 20 and len(buggy) >= 8
    for p in buggy:
        assert p.twin in names and pipelines[p.twin].healthy and p.bug in corpus.BUGS
    # the name's hash would have put some of them in tune: the module decides, not the hash
    assert {corpus.split(n) for n in names} == {"tune", "heldout"}
    assert calibration.select(list(pipelines), corpus.FRESH, "healthy", None) == sorted(
        healthy, key=list(pipelines).index
    )
    assert "softmax_before_cross_entropy" in corpus.BUGS["softmax_before_ce"][0]
    monkeypatch.setattr(sys, "argv", ["calibration.py", "--list", "--split", "fresh"])
    assert calibration.main() == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("\n\n")[0].splitlines()]
    assert sorted(listed) == sorted(names)
    assert f"fresh {len(healthy)} healthy + {len(buggy)} buggy" in out


def test_a_healthy_and_a_buggy_pipeline_run_through_the_workers(calibration, capsys):
    import psutil

    before = {p.pid for p in psutil.Process().children()}  # earlier tests' own, if any
    records = calibration.run([HEALTHY, BUGGY], jobs=2, progress=False)
    left = [" ".join(p.cmdline()) for p in psutil.Process().children() if p.pid not in before]
    assert not left, f"left running: {left}"
    assert [r["name"] for r in records] == sorted([HEALTHY, BUGGY])
    by_name = {r["name"]: r for r in records}
    for name, rec in by_name.items():
        assert rec["error"] is None, rec["error"]
        assert rec["split"] == calibration.corpus.split(name)
        assert rec["points"] > 100 and rec["train_s"] > 0
        assert all({"rule", "step", "severity", "message"} <= set(f) for f in rec["findings"])
    assert by_name[HEALTHY]["healthy"] and set(calibration.verdict(by_name[HEALTHY])) == {
        "alarmed",
        "alarmed_error",
    }
    bug = by_name[BUGGY]
    assert not bug["healthy"] and bug["bug"] == "dead_relu_init" and bug["cause"] == "bad_initialization"
    assert "dead_relu" in bug["expected"]
    summary = calibration.summarize(records)
    assert summary["all"]["healthy_runs"] == 1 and summary["all"]["buggy_runs"] == 1
    report = calibration.markdown(records, calibration._meta(2))
    assert HEALTHY in report and BUGGY in report and "| --- |" in report


def test_list(calibration, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["calibration.py", "--list", "--split", "tune"])
    assert calibration.main() == 0
    out = capsys.readouterr().out
    assert "heldout" not in out.split("\n\n")[0] and "pipelines: tune" in out
