"""Issue 19 end to end, in a real headless Chromium: the dashboard opened on a LIVE training (a
real tiny PyTorch training in its own process, writing into the served folder after the page
loaded). The page sees the new run appear, its step counter move, a rule's finding marked on
its chart, opens the finding's evidence, switches views and time axes, keeps its state over a
reload, and its Stop button ends the training.

Screenshots go to the test's tmp folder; with MLDBG_SCREENSHOTS=DIR (`make screenshots` sets
docs/images) they are written there too, for docs/dashboard.md."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

from tests.dashboard.helpers import Server, run_url

TOKEN = "e2e-token-0123456789"
WAIT = 120_000  # ms: generous, for a loaded 2-core machine (45 s ran out at load 14); every wait is on a condition
BLOW_UP = 30  # the step at which the live training's learning rate becomes 1e12

# a healthy start, an evaluation pass of 3 batches every 10 steps, the epoch and a
# hyper-parameter as scalars, a profiler; at BLOW_UP the learning rate jumps to 1e12 (the
# defect the rules find); it trains until stopped
TRAIN = textwrap.dedent(
    f"""
    import sys, time, torch
    from torch import nn
    import mldbg, mldbg.torch

    torch.manual_seed(0)
    x = torch.randn(96, 8)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    loss_fn = nn.CrossEntropyLoss()
    hook = mldbg.torch.Hook(
        sys.argv[1], save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05,
        include_collections=["weights", "biases", "gradients", "losses", "scalars", "relu_activations"],
        profiler_config=mldbg.ProfilerConfig(system_interval_ms=200),
    )
    hook.register_module(model)
    hook.register_loss(loss_fn)
    try:
        for step in range(5000):
            if step == {BLOW_UP}:
                for g in opt.param_groups:
                    g["lr"] = 1e12
            model.train()
            opt.zero_grad()
            loss_fn(model(x[:64]), y[:64]).backward()
            if step == 0:
                hook.save_scalar("hp/lr", 0.2)
                hook.save_scalar("hp/batch_size", 64)
            hook.save_scalar("epoch", step // 20)
            opt.step()
            if (step + 1) % 10 == 0:
                model.eval()
                with torch.no_grad():
                    for b in range(3):
                        loss_fn(model(x[64 + 10 * b: 74 + 10 * b]), y[64 + 10 * b: 74 + 10 * b])
            time.sleep(0.02)
    except mldbg.TrainingStopped as e:
        print("stopped at", step, e, flush=True)
        sys.exit(0)
    print("ran to the end", flush=True)
    sys.exit(3)
    """
)


def api(server: Server, path: str) -> dict:
    request = urllib.request.Request(server.url + path, headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(request, timeout=30) as r:
        return json.loads(r.read())


def shoot(page, tmp_path: Path, name: str, **options) -> Path:
    """A screenshot into the test's folder, and into MLDBG_SCREENSHOTS when set."""
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), **options)
    target = os.environ.get("MLDBG_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    return path


def js(expr: str) -> str:
    return f"() => {{ try {{ return !!({expr}); }} catch (e) {{ return false; }} }}"


def traces(plot: str) -> str:
    return f"(document.getElementById('{plot}').data || [])"


def test_live_training_new_run_steps_finding_evidence_axes_url_and_stop(browser, recorded, tmp_path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    shutil.copytree(recorded["explode"], sweep / "explode")
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    job = None
    page = browser.new_page(viewport={"width": 1500, "height": 1100})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: m.type == "error" and problems.append(f"console: {m.text}"))
    try:
        with Server(str(sweep), "--token", TOKEN) as server:
            page.goto(f"{server.url}?token={TOKEN}")
            page.wait_for_selector('.run[data-run="explode"][data-status="finished"]', timeout=WAIT)
            page.wait_for_function(js("window.mldbgDashboard.state.sse"), timeout=WAIT)
            assert page.query_selector('.run[data-run="live"]') is None
            page.evaluate("() => { window.__samePage = 'yes'; }")

            # a training starts writing into the served folder after the page loaded
            job = subprocess.Popen(
                [sys.executable, str(script), str(sweep / "live")], stdout=subprocess.PIPE, text=True
            )
            page.wait_for_selector('.run[data-run="live"][data-status="running"]', timeout=WAIT)

            # its step counter moves, without a reload
            page.wait_for_function(
                js("+document.querySelector('.run[data-run=\"live\"]').dataset.lastStep >= 22"), timeout=WAIT
            )
            seen = int(page.get_attribute('.run[data-run="live"]', "data-last-step"))
            page.wait_for_function(
                js(f"+document.querySelector('.run[data-run=\"live\"]').dataset.lastStep > {seen}"),
                timeout=WAIT,
            )
            assert page.evaluate("() => window.__samePage") == "yes"
            assert "step " in page.inner_text('.run[data-run="live"] .steps')

            # its configuration, as the run records it
            page.click('.run[data-run="live"] [data-config]')
            page.wait_for_selector('.run[data-run="live"] .config table', timeout=WAIT)
            config = page.inner_text('.run[data-run="live"] .config')
            assert "torch" in config and "lr=0.2" in config and "batch_size=64" in config
            assert "TRAIN" in config and "relu_activations" in config

            # evaluation per pass: one point per pass of 3 batches, at the pass's last step
            scalars = api(server, run_url("live") + "/scalars")
            loss = next(s for s in scalars["series"] if s["collection"] == "losses")
            passes = [s for i, s in enumerate(loss["steps"]) if loss["modes"][i] == "EVAL"
                      and (i + 1 == len(loss["steps"]) or loss["modes"][i + 1] != "EVAL")]  # fmt: skip
            assert len(passes) >= 2
            page.wait_for_function(
                js(
                    f"{traces('plot-losses')}.some(t => t.meta.run === 'live' && t.meta.mode === 'EVAL' && t.x.length >= {len(passes)})"
                ),
                timeout=WAIT,
            )
            drawn = page.evaluate(
                f"() => {{ const t = {traces('plot-losses')}.find(t => t.meta.run === 'live' && t.meta.mode === 'EVAL');"
                " return {x: Array.from(t.x), batches: t.customdata.map(c => c[1])}; }"
            )
            # (the newest pass may still be being recorded: only the ones before it are complete)
            assert drawn["x"][: len(passes) - 1] == passes[:-1] and drawn["batches"][0] == 3
            assert all(1 <= b <= 3 for b in drawn["batches"])

            shoot(page, tmp_path, "dashboard_live_training", full_page=True)

            # the rules find the blow-up: the finding in the list and marked on the losses chart
            finding = '#findings-list li.finding[data-run="live"][data-rule="exploding_tensor"]'
            page.wait_for_selector(finding, timeout=WAIT)
            found = next(
                f
                for f in api(server, run_url("live") + "/findings")["findings"]
                if f["rule"] == "exploding_tensor"
            )
            assert found["step"] >= BLOW_UP
            page.wait_for_function(
                js(
                    f"{traces('plot-losses')}.some(t => t.meta.finding && t.meta.run === 'live' && t.meta.steps.includes({found['step']}))"
                ),
                timeout=WAIT,
            )

            # clicking it opens its evidence: the finding's tensors around its step
            page.click(finding)
            page.wait_for_selector("#evidence[open]", timeout=WAIT)
            page.wait_for_function(
                js("document.getElementById('evidence').dataset.loaded === 'yes'"), timeout=WAIT
            )
            evidence = page.evaluate(
                f"() => ({{tensors: {traces('plot-evidence')}.filter(t => t.meta.evidence && !t.meta.loss).map(t => t.meta.tensor),"
                " line: document.getElementById('plot-evidence').layout.shapes[0].x0,"
                " text: document.getElementById('evidence-text').innerText})"
            )
            assert evidence["line"] == found["step"]
            assert evidence["tensors"] and set(evidence["tensors"]) <= set(found["tensors"])
            assert found["message"] in evidence["text"]
            shoot(page, tmp_path, "dashboard_evidence")
            page.click("#evidence-show")
            page.wait_for_selector("#evidence:not([open])", state="attached", timeout=WAIT)
            # ... and its tensors are on the Tensors chart, the finding marked at its step
            page.wait_for_function(
                js(
                    f"{traces('plot-reduction')}.some(t => t.meta.finding && t.meta.run === 'live' && t.meta.steps.includes({found['step']}))"
                ),
                timeout=WAIT,
            )
            shown = f"[...new Set({traces('plot-reduction')}.filter(t => !t.meta.finding).map(t => t.meta.tensor))]"
            # several tensors at once, where the finding names several (which finding comes first
            # live depends on the machine's speed; the chart draws them as their series arrive)
            page.wait_for_function(js(f"{shown}.length >= {min(2, len(found['tensors']))}"), timeout=WAIT)
            on_chart = page.evaluate(f"() => {shown}")
            assert len(on_chart) >= min(2, len(found["tensors"])) and set(on_chart) <= set(found["tensors"])
            assert not [t for t in on_chart if t.startswith("CrossEntropyLoss_output")]  # on the Losses chart
            shoot(page, tmp_path, "dashboard_tensors_finding", clip=_box(page, "#card-tensor"))

            # the per-layer health view: layers x steps
            page.click('.views button[data-view="layers"]')
            page.select_option("#layers-run", "live")
            page.wait_for_function(
                js(f"{traces('plot-layers')}.some(t => t.type === 'heatmap' && t.y.includes('0.weight'))"),
                timeout=WAIT,
            )
            page.select_option("#layers-metric", "dead_fraction")
            page.wait_for_function(
                js(
                    f"{traces('plot-layers')}.some(t => t.type === 'heatmap' && t.meta.metric === 'dead_fraction' && t.y.length >= 2)"
                ),
                timeout=WAIT,
            )
            page.select_option("#layers-metric", "grad_l2")
            page.wait_for_function(
                js(f"{traces('plot-layers')}.some(t => t.type === 'heatmap' && t.meta.metric === 'grad_l2')"),
                timeout=WAIT,
            )
            shoot(page, tmp_path, "dashboard_layers", clip=_box(page, "#card-layers"))

            # the profiler panel: utilisation, step phases, the profiler rules' verdicts
            page.click('.views button[data-view="profiler"]')
            page.select_option("#profiler-run", "live")
            page.wait_for_function(
                js(
                    f"{traces('plot-utilisation')}.some(t => t.x.length >= 3) && {traces('plot-phases')}.some(t => t.x.length >= 3)"
                ),
                timeout=WAIT,
            )
            page.wait_for_selector("#verdicts tr[data-rule]", timeout=WAIT)
            shoot(page, tmp_path, "dashboard_profiler", clip=_box(page, "#card-profiler"))

            # the wall-clock axis; the state is in the address and survives a reload
            page.click('.views button[data-view="training"]')
            page.click('.axis button[data-axis="wall"]')
            page.wait_for_function(
                js("document.getElementById('plot-losses').layout.xaxis.type === 'date'"), timeout=WAIT
            )
            xs = page.evaluate(
                f"() => {traces('plot-losses')}.filter(t => t.meta.run === 'live' && !t.meta.finding).flatMap(t => Array.from(t.x))"
            )
            assert xs and min(xs) > 1.7e12  # ms since 1970: wall-clock times
            colours = page.evaluate(
                f"() => Object.fromEntries({traces('plot-losses')}.filter(t => !t.meta.finding).map(t => [t.meta.run, t.line.color]))"
            )
            hash_before = page.evaluate("() => location.hash")
            assert "axis=wall" in hash_before and "tensors=" in hash_before
            tensors_before = page.evaluate("() => window.mldbgDashboard.state.tensorList")
            page.reload()
            page.wait_for_function(
                js(f"{traces('plot-losses')}.some(t => t.meta.run === 'live')"), timeout=WAIT
            )
            assert page.evaluate("() => document.getElementById('plot-losses').layout.xaxis.type") == "date"
            assert page.evaluate("() => window.mldbgDashboard.state.tensorList") == tensors_before
            after = page.evaluate(
                f"() => Object.fromEntries({traces('plot-losses')}.filter(t => !t.meta.finding).map(t => [t.meta.run, t.line.color]))"
            )
            assert after == colours and colours["live"] != colours["explode"]
            assert colours["live"] == page.evaluate("() => window.mldbgDashboard.runColor('live')")
            page.click('.axis button[data-axis="relative"]')
            page.wait_for_function(
                js("document.getElementById('plot-losses').layout.xaxis.title.text.startsWith('seconds')"),
                timeout=WAIT,
            )
            rel = page.evaluate(
                f"() => {traces('plot-losses')}.filter(t => t.meta.run === 'live' && !t.meta.finding).flatMap(t => Array.from(t.x))"
            )
            assert 0 <= min(rel) < 60 and max(rel) > min(rel)
            page.click('.axis button[data-axis="step"]')

            # Stop: armed by a first click, sent by the second; the training ends, the run is stopped
            assert job.poll() is None
            page.click('.run[data-run="live"] [data-stop]')
            page.click('.run[data-run="live"] [data-stop].armed')
            page.wait_for_selector('.run[data-run="live"][data-status="stopped"]', timeout=WAIT)
            assert job.wait(timeout=60) == 0
            assert "stopped at" in job.stdout.read()
            assert "stopped from the dashboard" in api(server, run_url("live"))["stop_requested"]
            page.wait_for_selector('.run[data-run="live"] [data-stop]', state="detached", timeout=WAIT)
            shoot(page, tmp_path, "dashboard_stopped", full_page=True)
            assert not problems, problems
    finally:
        page.close()
        if job is not None:
            if job.poll() is None:
                job.kill()
            job.wait()
            job.stdout.close()


def _box(page, selector: str) -> dict:
    box = page.locator(selector).bounding_box()
    return {"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"]}
