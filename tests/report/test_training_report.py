"""`mldbg report` on a run recorded with the two lines (statistics, not raw labels, at most
steps) and on one with raw tensors: both write the page, with the sections their data allows."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.tiny import ALL_COLLECTIONS, train


@pytest.mark.parametrize("two_lines", [True, False], ids=["two-line hook", "raw tensors"])
def test_report_writes_the_page(tmp_path, two_lines):
    if two_lines:
        train(tmp_path / "run", steps=30, default_hook=True)
    else:
        train(tmp_path / "run", steps=30, save_interval=5, include_collections=ALL_COLLECTIONS)
    out = tmp_path / "report.html"
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "report", str(tmp_path / "run"), "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert "<html" in page.lower() and "loss" in page.lower()
    if not two_lines:  # raw labels and predictions: the label section is there
        assert "Label distribution" in page
