"""The dashboard page in a real headless Chromium: runs overlaid, the defective run's finding
shown, and steps recorded after the page loaded drawn without a reload."""

from __future__ import annotations

import pytest

import mldbg
from tests.dashboard.helpers import LiveTraining, Server, run_url

SCREENSHOT = "/tmp/mldbg_dashboard.png"

TRACE_RUNS = """() => {
  const d = document.getElementById('plot-losses').data || [];
  return [...new Set(d.filter(t => t.meta && !t.meta.raw).map(t => t.meta.run))].sort();
}"""
LAST_X = """(run) => {
  const d = (document.getElementById('plot-losses').data || []).filter(t => t.meta && t.meta.run === run);
  return Math.max(-1, ...d.flatMap(t => Array.from(t.x)));
}"""


def test_page_overlays_runs_shows_findings_and_updates_live(browser, recorded, tmp_path):
    training = LiveTraining(tmp_path / "live", first=10, rest=20)
    training.start()
    assert training.paused.wait(60)
    page = None
    try:
        with Server(str(tmp_path / "live"), str(recorded["explode"]), str(tmp_path / "later")) as server:
            page = browser.new_page(viewport={"width": 1500, "height": 1300})
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
            page.goto(server.url)

            # the losses of every run that has steps, one colour per run
            page.wait_for_function(f"() => ({TRACE_RUNS})().length === 2", timeout=20_000)
            assert page.evaluate(TRACE_RUNS) == ["explode", "live"]
            colours = page.evaluate(
                "() => Object.fromEntries(document.getElementById('plot-losses').data.map(t => [t.meta.run, t.line.color]))"
            )
            assert colours["live"] != colours["explode"]
            modes = page.evaluate("() => document.getElementById('plot-losses').data.map(t => t.meta.mode)")
            assert {"TRAIN", "EVAL"} <= set(modes)

            # each run's state
            for name, status in (("live", "running"), ("explode", "finished"), ("later", "waiting")):
                page.wait_for_selector(f'.run[data-run="{name}"][data-status="{status}"]', timeout=20_000)

            # the defective run's finding, with its badge
            finding = page.wait_for_selector(
                '#findings-list li.finding[data-run="explode"][data-rule="exploding_tensor"]', timeout=20_000
            )
            expected = server.json(run_url("explode") + "/findings")["findings"]
            first = next(f for f in expected if f["rule"] == "exploding_tensor")
            text = finding.inner_text()
            assert (
                first["message"] in text and first["suggestion"] in text and f"step {first['step']}" in text
            )
            page.wait_for_function(
                f"""() => document.querySelector('.run[data-run="explode"] .badge').textContent === '{len(expected)}'""",
                timeout=20_000,
            )
            assert page.inner_text('.run[data-run="live"] .badge') == "0"

            # a tensor only one run has: its curve, and a note for the other run
            page.select_option("#tensor", "gradient/0.weight")
            page.wait_for_function(
                "() => (document.getElementById('plot-reduction').data || []).some(t => t.meta && t.meta.run === 'live' && t.meta.tensor === 'gradient/0.weight')",
                timeout=20_000,
            )
            page.wait_for_selector("#tensor-note:not([hidden])")
            assert "explode has no tensor gradient/0.weight" in page.inner_text("#tensor-note")

            # steps recorded after the page loaded appear, without a reload
            shown = page.evaluate(LAST_X, "live")
            page.evaluate("() => { window.__samePage = 'yes'; }")
            training.finish()
            last = mldbg.create_trial(tmp_path / "live").tensor("CrossEntropyLoss_output_0").steps()[-1]
            assert last > shown
            page.wait_for_function(f"(run) => ({LAST_X})(run) === {last}", arg="live", timeout=20_000)
            page.wait_for_selector('.run[data-run="live"][data-status="finished"]', timeout=20_000)
            assert page.evaluate("() => window.__samePage") == "yes"
            red = server.json(run_url("live") + "/reduction", tensor="gradient/0.weight", reduction="l2")
            page.wait_for_function(
                f"() => document.getElementById('plot-reduction').data.find(t => t.meta.run === 'live').x.length === {len(red['steps'])}",
                timeout=20_000,
            )
            drawn = page.evaluate(
                "() => Array.from(document.getElementById('plot-reduction').data.find(t => t.meta.run === 'live').y)"
            )
            assert drawn == pytest.approx(red["values"], rel=1e-12)
            # the distribution bands and the histogram of the chosen run
            page.wait_for_function(
                "() => (document.getElementById('plot-histogram').data || []).length === 1", timeout=20_000
            )
            assert len(page.evaluate("() => document.getElementById('plot-distribution').data")) == 9
            page.wait_for_timeout(300)
            page.screenshot(path=SCREENSHOT, full_page=True)
            assert not problems, problems
    finally:
        if page is not None:
            page.close()
        training.go.set()
        training.join(30)
