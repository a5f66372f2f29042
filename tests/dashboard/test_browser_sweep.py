"""A sweep of 200 runs in a real headless Chromium: every run listed with its curve, the list
filtered, the overlay narrowed to the chosen runs (and the choice kept in the address)."""

from __future__ import annotations

import shutil
import time

from tests.dashboard.helpers import Server
from tests.tiny import train

RUNS = 200
WAIT = 60_000


def test_a_sweep_of_200_runs_lists_filters_and_overlays_chosen_runs(browser, tmp_path):
    base = tmp_path / "base"
    train(base, steps=8, eval_every=None, include_collections=("losses",))  # a small run, copied
    sweep = tmp_path / "sweep"
    for i in range(RUNS):
        shutil.copytree(base, sweep / f"lr_{i:03d}")
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    try:
        with Server(str(sweep), "--no-rules") as server:
            start = time.monotonic()
            page.goto(server.url)
            page.wait_for_function(
                f"() => new Set((document.getElementById('plot-losses').data || []).map(t => t.meta.run)).size === {RUNS}",
                timeout=WAIT,
            )
            every_curve = time.monotonic() - start
            assert page.locator(".run").count() == RUNS
            assert every_curve < 30, f"{RUNS} runs took {every_curve:.1f}s to draw"
            # colours: from the names, so mostly different
            colours = page.evaluate(
                "() => new Set([...document.querySelectorAll('.run')].map(e => e.style.getPropertyValue('--c'))).size"
            )
            assert colours > RUNS // 2

            # filter the list, then draw only two runs
            page.fill("#runs-filter", "lr_01")
            page.wait_for_function("() => document.querySelectorAll('.run').length === 10", timeout=WAIT)
            page.click("#runs-all")  # (all drawn: nothing changes)
            page.fill("#runs-filter", "")
            page.wait_for_function(f"() => document.querySelectorAll('.run').length === {RUNS}", timeout=WAIT)
            # keep only lr_007 and lr_123: through the address, as a shared link would
            page.evaluate("() => { location.hash = 'runs=lr_007,lr_123'; }")
            page.wait_for_function(
                "() => JSON.stringify([...new Set(document.getElementById('plot-losses').data.map(t => t.meta.run))].sort()) === '[\"lr_007\",\"lr_123\"]'",
                timeout=WAIT,
            )
            assert page.locator(".run.off").count() == RUNS - 2
            # and one more by its checkbox
            page.check('.run[data-run="lr_050"] .choose')
            page.wait_for_function(
                "() => new Set(document.getElementById('plot-losses').data.map(t => t.meta.run)).size === 3",
                timeout=WAIT,
            )
            assert "lr_050" in page.evaluate("() => decodeURIComponent(location.hash)")
            assert not problems, problems
    finally:
        page.close()
