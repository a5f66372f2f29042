"""The installable package: `python -m build` makes an sdist and a wheel, and the wheel
installed in a fresh venv gives a working `mldbg` (console script, dashboard assets, the
torch hook), with no network and without reinstalling torch: the venv gets the wheel alone
(`pip install --no-deps --no-index`), and finds its dependencies (numpy, click, torch...) in
the test's own environment through a .pth file, after its own site-packages, so the mldbg it
imports is the wheel's."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "smdebug_run" / "run"
ASSETS = {"index.html", "dashboard.js", "dashboard.css"}


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{cmd}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout


def test_wheel_builds_installs_and_runs(tmp_path: Path) -> None:
    # build from a copy of the sources, so the checkout gets no build/ or egg-info
    source = tmp_path / "source"
    source.mkdir()
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp_path / "dist"), "."], cwd=source
    )
    wheels = list((tmp_path / "dist").glob("mldbg-*-py3-none-any.whl"))
    assert len(wheels) == 1 and list((tmp_path / "dist").glob("mldbg-*.tar.gz"))  # built from the sdist

    with zipfile.ZipFile(wheels[0]) as whl:
        names = whl.namelist()
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = whl.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert {n.rsplit("/", 1)[-1] for n in names if n.startswith("mldbg/dashboard/static/")} >= ASSETS
    assert (
        "mldbg/trial/smdebug/proto.py" in names and "mldbg/cli/main.py" in names and "mldbg/py.typed" in names
    )
    assert not [n for n in names if n.startswith("tests/") or "/tests/" in n or n.startswith("benchmarks/")]
    assert "mldbg = mldbg.cli.main:main" in entry_points
    assert "Provides-Extra: torch" in metadata and 'Requires-Dist: torch>=2.4; extra == "torch"' in metadata

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", f"{wheels[0]}[torch]"],
        cwd=tmp_path,
    )  # fmt: skip
    purelib = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
        ).strip()
    )
    # the dependencies: this environment's site-packages, after the venv's own
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

    helped = run([str(venv / "bin" / "mldbg"), "--help"], cwd=tmp_path, env=env)
    assert "check" in helped and "dashboard" in helped
    where = run(
        [str(python), "-c",
         "import mldbg, mldbg.dashboard, mldbg.torch; from importlib import resources; "
         "print(mldbg.__file__); print(sorted(p.name for p in resources.files('mldbg.dashboard').joinpath('static').iterdir()))"],
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert where.splitlines()[0].startswith(str(purelib)), where  # the wheel's mldbg, not the checkout's
    assert all(a in where for a in ASSETS)

    # it works: a tiny training recorded with the installed torch hook, then checked
    script = (
        "import torch, mldbg.torch\n"
        "torch.manual_seed(0)\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "with mldbg.torch.Hook('run') as hook:\n"
        "    hook.register_module(model)\n"
        "    for _ in range(5):\n"
        "        opt.zero_grad(); model(torch.randn(16, 4)).pow(2).mean().backward(); opt.step()\n"
    )
    run([str(python), "-c", script], cwd=tmp_path, env=env)
    listed = run([str(venv / "bin" / "mldbg"), "ls", "run"], cwd=tmp_path, env=env)
    assert "gradient/0.weight" in listed, listed
    checked = subprocess.run(
        [str(venv / "bin" / "mldbg"), "check", str(DATA)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert checked.returncode in (0, 1) and "Traceback" not in checked.stderr, checked.stderr
