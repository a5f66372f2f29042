"""Long runs and many names: how long `mldbg check`, `mldbg ls` and the dashboard's first page
take, and how much memory, on a run of 10^6 steps and on a run of 100,000 scalar names.

    .venv/bin/python benchmarks/long_check.py [--steps 1000000] [--names 100000]
        [--cases long,nan,names,names_nan] [--runs DIR] [--repeat 1] [--before OTHER/src]
        [--page /usr/bin/chromium [--page-limit 120]]

The runs are written through the real recorder, as the two lines record them:
- `long`: a PyTorch model of 100 parameter tensors (50 `Linear` layers) is recorded with
  `mldbg.torch.Hook` for a few steps to learn what the two lines save of it (the loss every
  step, the statistics the default rules read on the hook's schedule); then the same hook's
  recorder writes `--steps` steps of it: the loss every step (a noisy decaying series), the
  statistics (those of the template step, perturbed) at every step to 19, then every 100th,
  as `Cadence` plans them.
- `nan`: the same, with the loss NaN over its last 30% of steps.
- `names`: 3 steps of `--names` scalars saved with `save_scalar` (the `scalars` collection).
- `names_nan`: the same, with a NaN in 1 of every 1,000 names at step 1 and an infinity in as
  many others at step 2 (`exploding_tensor` fires: `check` judges the steps that hold them).

Each command then runs in a fresh process (`mldbg check PATH`, `mldbg ls PATH`, the
dashboard's whole `/scalars` answer, and the dashboard's first page: the answers the page asks
first, `/api/runs`, `/tensors`, the first page of `/scalars` (`SCALARS_PAGE` series; all of
them with a checkout that has no paged answer) and `/api/findings`, each made and turned into
JSON by `mldbg.dashboard` in a fresh process), timed from
the outside, with its peak RSS (the child's own `VmHWM`). `--runs DIR` keeps the runs there
and reuses them; `--before OTHER/src` times another checkout's code too, each command with it
and then with this one, alternating (an A/B on the same runs at the same load). `--page
CHROMIUM` also opens the dashboard's page on the names runs in that headless Chromium
(`mldbg dashboard PATH`, rules on, driven by Playwright) and times it from opening to its
losses and scalars drawn.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

LAYERS = 50  # 50 Linear layers: 100 parameter tensors
WIDTH = 8


_TEMPLATE: list[tuple[dict, dict, int, str]] = []


def _template(tmp: Path) -> tuple[dict, dict, int, str]:
    """What the two lines save at one statistics step of the model: (values, tensors,
    nbytes, the loss's name), captured from a real hook over three real training steps."""
    if _TEMPLATE:
        return _TEMPLATE[0]
    import torch
    from torch import nn

    import mldbg.torch

    torch.manual_seed(0)

    class Residual(nn.Module):  # healthy at any depth: the gradients reach every layer
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for block in self.blocks:
                x = x + 0.02 * torch.relu(block(x))
            return x

    model = Residual()
    loss_fn = nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    captured: list[tuple[dict, dict, int]] = []
    hook = mldbg.torch.Hook(str(tmp / "template"))
    hook.register_module(model)
    hook.register_loss(loss_fn)
    rec = hook.recorder
    original = rec.save_statistics

    def capture(values, tensors, nbytes):  # the values are read when the step is written
        original(values, tensors, nbytes)
        captured.append(({}, dict(tensors), nbytes))
        box = captured[-1][0]
        original_values = rec._statistics[-1].values

        def read():
            got = original_values()
            box.update({k: dict(v) for k, v in got.items()})
            return got

        rec._statistics[-1].values = read

    rec.save_statistics = capture  # type: ignore[method-assign]
    x, y = torch.randn(16, WIDTH), torch.randn(16, WIDTH)
    for _ in range(3):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    hook.close()
    values, tensors, nbytes = captured[-1]
    losses = mldbg.create_trial(str(tmp / "template")).tensor_names(collection="losses")
    _TEMPLATE.append((values, tensors, nbytes, losses[0]))
    return _TEMPLATE[0]


def _loss(n: int, rng: np.random.Generator, nan_tail: bool) -> np.ndarray:
    t = np.arange(n, dtype=np.float64)
    loss = 0.2 + 2.0 / (1 + t / (n / 200)) ** 0.9
    loss *= 1 + 0.05 * rng.standard_normal(n)
    if nan_tail:
        loss[int(n * 0.7) :] = np.nan
    return loss.astype(np.float32)


def write_long(path: Path, steps: int, nan_tail: bool, tmp: Path) -> None:
    """`steps` steps of the model as the two lines record them, through the hook's recorder."""
    import mldbg.torch
    from mldbg.config import Mode
    from mldbg.frameworks.torch_defaults import Cadence

    values, tensors, nbytes, loss_name = _template(tmp)
    rng = np.random.default_rng(1)
    loss = _loss(steps, rng, nan_tail)
    hook = mldbg.torch.Hook(str(path))
    rec = hook.recorder
    cadence = Cadence()
    floats = {
        n: [k for k, v in kv.items() if isinstance(v, float) and np.isfinite(v) and v != int(v)]
        for n, kv in values.items()
    }
    t0 = time.perf_counter()
    for step in range(steps):
        rec.start_step(Mode.TRAIN)
        plan = rec.plan(loss_name, ("losses",))
        if plan is not None:
            rec.save(loss_name, np.asarray(loss[step]), plan)
        if cadence.due(Mode.TRAIN, step):
            drift = 1 + 1e-3 * rng.standard_normal(len(values))
            now = {}
            for (name, kv), d in zip(values.items(), drift, strict=True):
                now[name] = dict(kv)
                for k in floats[name]:
                    now[name][k] = kv[k] * float(d)
            rec.save_statistics(lambda now=now: now, tensors, nbytes)
        rec.end_step()
        if step and step % 100_000 == 0:
            print(f"  {path.name}: {step} steps, {time.perf_counter() - t0:.0f} s", flush=True)
    hook.close()


def write_names(path: Path, names: int, bad: bool = False) -> None:
    """3 steps of `names` scalars, through the recorder; `bad`: a NaN in every 1,000th name
    at step 1, an infinity in every 1,000th (others) at step 2."""
    from mldbg.config import SaveConfig
    from mldbg.record.recorder import Recorder

    rec = Recorder(str(path), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(2)
    for step in range(3):
        rec.start_step()
        vals = rng.standard_normal(names)
        if bad and step == 1:
            vals[::1000] = np.nan
        if bad and step == 2:
            vals[500::1000] = np.inf
        for i in range(names):
            rec.save_scalar(f"metric/{i:06d}", float(vals[i]))
        rec.end_step()
    rec.close()


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, int, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, exit code, output tail) of a fresh process.
    On a shared machine the CPU time (user + system of the child) is the steadier figure."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out = proc.stdout + proc.stderr
    rss = _child_rss(out)  # the child prints its own peak (ru_maxrss of children is the largest)
    return wall, cpu, rss if rss is not None else float("nan"), proc.returncode, out[-400:]


def _child_rss(out: str) -> float | None:
    for line in out.splitlines()[::-1]:
        if line.startswith("PEAK_RSS_KB "):
            return int(line.split()[1]) / 1024
    return None


# a child's own peak: /proc's VmHWM, of its own address space. Not ru_maxrss: Linux carries
# the high-water mark across exec, so a child of this process (grown by the runs it wrote)
# would report this process's peak, not its own
_PEAK = (
    "def peak_kb():\n"
    "    try:\n"
    "        with open('/proc/self/status') as f:\n"
    "            return next(int(l.split()[1]) for l in f if l.startswith('VmHWM:'))\n"
    "    except (OSError, StopIteration):\n"
    "        import resource\n"
    "        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
)

_WRAP = _PEAK + (
    "import resource, sys, runpy\n"
    "sys.argv = ['mldbg', *sys.argv[1:]]\n"
    "from mldbg.cli.main import main\n"
    "try:\n"
    "    code = main()\n"
    "except SystemExit as e:\n"
    "    code = e.code\n"
    "print('PEAK_RSS_KB', peak_kb(), flush=True)\n"
    "sys.exit(code or 0)\n"
)

_DASH = _PEAK + (
    "import json, resource, sys\n"
    "from mldbg.dashboard.data import Dashboard\n"
    "dashboard = Dashboard([sys.argv[1]])\n"
    "run = next(iter(dashboard.runs.values()))\n"
    "body = json.dumps(run.scalars(None))\n"
    "print('BYTES', len(body))\n"
    "print('PEAK_RSS_KB', peak_kb(), flush=True)\n"
)


_PAGE = _PEAK + (
    "import json, resource, sys\n"
    "from mldbg.dashboard import data\n"
    "dashboard = data.Dashboard([sys.argv[1]])\n"
    "run = next(iter(dashboard.runs.values()))\n"
    "page = getattr(data, 'SCALARS_PAGE', None)  # a checkout before the paged answer: all\n"
    "n = 0\n"
    "for answer in (\n"
    "    lambda: {'runs': [run.summary()]},\n"
    "    run.tensors,\n"
    "    lambda: run.scalars(None) if page is None else run.scalars(None, limit=page),\n"
    "    lambda: {'runs': {run.name: run.findings_info()}},\n"
    "):\n"
    "    n += len(json.dumps(answer(), separators=(',', ':'), allow_nan=False))\n"
    "print('BYTES', n)\n"
    "print('PEAK_RSS_KB', peak_kb(), flush=True)\n"
)


_BROWSER = (
    "import re, subprocess, sys, time\n"
    "from playwright.sync_api import sync_playwright\n"
    "path, chromium, limit = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "server = subprocess.Popen([sys.executable, '-m', 'mldbg.cli.main', 'dashboard', path, '--port', '0'],\n"
    "                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)\n"
    "url = re.search(r'http://\\S+/', server.stdout.readline()).group(0)\n"
    "try:\n"
    "    with sync_playwright() as p:\n"
    "        browser = p.chromium.launch(executable_path=chromium, args=['--headless', '--no-sandbox', '--disable-gpu'])\n"
    "        page = browser.new_page(viewport={'width': 1400, 'height': 1400})\n"
    "        t0 = time.perf_counter()\n"
    "        page.goto(url + '?events=off')\n"
    "        try:\n"
    "            page.wait_for_function(\"() => document.body.dataset.filled === 'data' && \"\n"
    "                \"(document.getElementById('plot-scalars').data || []).length > 0\", timeout=limit * 1000)\n"
    "            print('DRAWN', time.perf_counter() - t0, flush=True)\n"
    "        except Exception:\n"
    "            print('NOT_DRAWN', limit, flush=True)\n"
    "        browser.close()\n"
    "finally:\n"
    "    server.terminate()\n"
    "    server.wait()\n"
)


def page_seconds(path: Path, env: dict[str, str], chromium: str, limit: float) -> tuple[float | None, str]:
    """Seconds from opening the page in headless Chromium (the run served by `mldbg
    dashboard`, its rules on) to the losses and scalars drawn; None when not in `limit`."""
    cmd = [sys.executable, "-c", _BROWSER, str(path), chromium, str(limit)]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit + 120)
    except subprocess.TimeoutExpired:
        return None, "the browser did not answer"
    for line in proc.stdout.splitlines():
        if line.startswith("DRAWN "):
            return float(line.split()[1]), ""
    return None, (proc.stdout + proc.stderr)[-300:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--names", type=int, default=100_000)
    ap.add_argument("--cases", default="long,nan,names")
    ap.add_argument("--runs", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument(
        "--before",
        default=None,
        help="the src folder of another checkout (`git archive <base> src | tar -x -C DIR`): each "
        "command runs with it and then with this checkout, alternating, on the same runs",
    )
    ap.add_argument(
        "--page",
        default=None,
        metavar="CHROMIUM",
        help="also time the dashboard's page itself on the names runs, opened in this headless "
        "Chromium (Playwright drives it) until its charts are drawn",
    )
    ap.add_argument("--page-limit", type=float, default=120.0, help="seconds the page is given to draw")
    args = ap.parse_args()
    cases = args.cases.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="mldbg-long-"))
    runs = Path(args.runs) if args.runs else tmp
    runs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    sides = [("after", env)]
    if args.before:
        before = dict(os.environ)
        before["PYTHONPATH"] = os.pathsep.join(
            [str(Path(args.before).resolve()), os.environ.get("PYTHONPATH", "")]
        )
        sides = [("before", before), ("after", env)]
    py = sys.executable
    rows: list[tuple[str, str, str, float, float, float, int]] = []
    for case in cases:
        path = runs / (f"{case}-{args.steps}" if not case.startswith("names") else f"{case}-{args.names}")
        if not path.exists():
            t0 = time.perf_counter()
            if case.startswith("names"):
                write_names(path, args.names, bad=case == "names_nan")
            else:
                write_long(path, args.steps, case == "nan", tmp)
            print(f"wrote {path} in {time.perf_counter() - t0:.0f} s", flush=True)
        commands = [("check", [py, "-c", _WRAP, "check", str(path)])]
        if case.startswith("names"):
            commands += [
                ("ls", [py, "-c", _WRAP, "ls", str(path)]),
                ("dashboard /scalars", [py, "-c", _DASH, str(path)]),
                ("dashboard first page", [py, "-c", _PAGE, str(path)]),
            ]
        for what, cmd in commands:
            for _ in range(args.repeat):
                for side, side_env in sides:
                    wall, cpu, rss, code, tail = timed(cmd, side_env)
                    print(
                        f"{case:6s} {what:20s} {side:6s} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:7.0f} MB  exit {code}",
                        flush=True,
                    )
                    if code not in (0, 1):
                        print(tail)
                    rows.append((case, what, side, wall, cpu, rss, code))
        if case.startswith("names") and args.page:
            for _ in range(args.repeat):
                for side, side_env in sides:
                    drawn, why = page_seconds(path, side_env, args.page, args.page_limit)
                    shown = (
                        f"{drawn:7.2f} s" if drawn is not None else f"not drawn in {args.page_limit:.0f} s"
                    )
                    print(f"{case:6s} {'page in Chromium':20s} {side:6s} {shown}", flush=True)
                    if why:
                        print(why)
    print("\n| run | command | wall s | CPU s | peak RSS MB | exit |\n| --- | --- | --- | --- | --- | --- |")
    label = {
        "long": f"{args.steps:,} steps, loss every step + statistics of 100 tensors on the budget",
        "nan": "the same, loss NaN over its last 30%",
        "names": f"3 steps x {args.names:,} scalar names",
        "names_nan": f"the same, a NaN in {args.names // 1000:,} names at step 1, an inf in as many at step 2",
    }
    for case, what, side, wall, cpu, rss, code in rows:
        which = f" ({side})" if args.before else ""
        print(f"| {label[case]} | `{what}`{which} | {wall:.2f} | {cpu:.2f} | {rss:.0f} | {code} |")


if __name__ == "__main__":
    main()
