"""Gaps drawn as gaps, and the filled page captured headless (issue #29 items 4 and 8), in a
real headless Chromium: a 150-step training recorded with the two lines saves statistics every
step for its first steps, then rarely, and raw values at step 0 only. The Tensors chart breaks
its line at the gap and says the cadence; the Distribution panel says why it has one step; the
page is filled (data drawn, not "connecting..."), also for the documented screenshot command."""

from __future__ import annotations

import re
import subprocess

import pytest

import mldbg
from mldbg.report.cadence import of_series
from tests.dashboard.conftest import ARGS, CHROMIUM
from tests.dashboard.helpers import Server, run_url
from tests.tiny import train

TENSOR = "fc1.weight"
REDUCTION = """() => (document.getElementById('plot-reduction').data || [])
  .map(t => ({x: Array.from(t.x), y: Array.from(t.y), mode: t.mode, steps: (t.customdata || []).map(c => c[0])}))"""


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    path = tmp_path_factory.mktemp("gaps") / "sparse"
    train(path, steps=150, eval_every=None, default_hook=True)
    trial = mldbg.create_trial(path)
    saved = trial.tensor(TENSOR).steps()
    pace = of_series(trial, saved)
    assert pace.breaks, f"the two lines saved {TENSOR} without a gap: {saved}"  # what these tests are about
    return path, saved, pace


def test_tensor_chart_breaks_at_gaps_and_says_the_cadence(browser, sparse):
    path, saved, pace = sparse
    with Server(str(path)) as server:
        body = server.json(run_url("sparse") + "/reduction", tensor=TENSOR, reduction="l2")
        assert body["breaks"] == pace.breaks and body["cadence"] == {"TRAIN": pace.text} and body["sparse"]
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        try:
            page.goto(f"{server.url}#tensors={TENSOR}")
            page.wait_for_function(
                "() => (document.getElementById('plot-reduction').data || []).some(t => t.y && t.y.length > 1)",
                timeout=30_000,
            )
            (trace,) = [t for t in page.evaluate(REDUCTION) if t["y"]]
            # one null point before each step after a gap, so Plotly stops the line there
            nulls = [i for i, y in enumerate(trace["y"]) if y is None]
            assert [trace["steps"][i] for i in nulls] == pace.breaks
            assert all(trace["steps"][i + 1] == trace["steps"][i] for i in nulls)
            drawn = [s for s, y in zip(trace["steps"], trace["y"], strict=True) if y is not None]
            assert drawn == saved  # every saved step is drawn, nothing else
            assert "markers" in trace["mode"]  # a sparse series shows its points
            note = page.inner_text("#tensor-cadence")
            assert page.is_visible("#tensor-cadence") and f"saved {pace.text}" in note

            # the Distribution panel says it has raw values at one step and why
            page.wait_for_selector("#dist-note:not([hidden])", timeout=30_000)
            dist = page.inner_text("#dist-note")
            assert "raw values saved at step 0 only" in dist and "statistics only" in dist, dist
            assert re.search(rf"\b{len(saved) - 1} other saved steps\b", dist), dist
            assert not problems, problems
        finally:
            page.close()


def test_the_page_is_filled_not_connecting(browser, sparse):
    path, _, _ = sparse
    with Server(str(path)) as server:
        page = browser.new_page(viewport={"width": 1400, "height": 1400})
        try:
            page.goto(server.url)
            page.wait_for_selector('body[data-filled="data"]', timeout=30_000)
            assert "connecting" not in page.inner_text("#live-text")
            assert page.evaluate(
                "() => (document.getElementById('plot-losses').data || []).some(t => t.x.length > 100)"
            )
        finally:
            page.close()


def test_the_documented_screenshot_command_captures_the_filled_page(sparse, tmp_path):
    """docs/dashboard.md's command: polling only (?events=off) and a virtual-time budget, so
    Chromium captures the page once it drew the server's data; --dump-dom shows what it drew."""
    path, _, _ = sparse
    with Server(str(path)) as server:
        shot = tmp_path / "dashboard.png"
        url = f"{server.url}?events=off"
        budget = ["--window-size=1400,1800", "--virtual-time-budget=10000"]
        took = subprocess.run(
            [CHROMIUM, *ARGS, *budget, f"--screenshot={shot}", url], capture_output=True, timeout=120
        )
        assert took.returncode == 0 and shot.stat().st_size > 10_000, took.stderr[-2000:]
        dom = subprocess.run(
            [CHROMIUM, *ARGS, *budget, "--dump-dom", url], capture_output=True, text=True, timeout=120
        )
        assert 'data-filled="data"' in dom.stdout, dom.stdout[-3000:]
        live = re.search(r'<span id="live-text">([^<]*)<', dom.stdout)
        assert live and "connecting" not in live.group(1)


def test_layer_heatmap_leaves_gaps_blank(browser, sparse):
    path, saved, pace = sparse
    with Server(str(path)) as server:
        body = server.json(run_url("sparse") + "/layers")
        assert body["breaks"] == pace.breaks and body["cadence"] == pace.text
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{server.url}#view=layers")
            page.wait_for_function(
                "() => (document.getElementById('plot-layers').data || []).some(t => t.meta && t.meta.layers && t.z.length)",
                timeout=30_000,
            )
            heat = page.evaluate(
                "() => { const t = document.getElementById('plot-layers').data.find(t => t.meta && t.meta.layers && !t.meta.nonfinite);"
                " return {x: Array.from(t.x), z: t.z.map(r => Array.from(r)), gaps: t.meta.gaps}; }"
            )
            assert heat["gaps"] == len(pace.breaks)
            # the columns at the gap's edges are empty, and no saved step's cell reaches across it
            first = pace.breaks[0]
            before = max(s for s in saved if s < first)
            inside = [i for i, x in enumerate(heat["x"]) if before < x < first]
            assert len(inside) == 2 and all(row[i] is None for row in heat["z"] for i in inside)
            assert "left blank" in page.inner_text("#layers-note") and pace.text in page.inner_text(
                "#layers-note"
            )
        finally:
            page.close()
