"""Which rule fires on which injected defect through every adapter other than PyTorch: the
default rule set of `mldbg check` over tiny real trainings recorded with each adapter's two
lines (Keras 3 `fit` on the TensorFlow, JAX and PyTorch backends, TensorFlow `GradientTape`
eager and in `tf.function`, JAX eager, inside `jit` and through `mldbg.jax.statistics`).

    .venv/bin/python benchmarks/adapter_defects.py [--adapters NAME...] [--only SCENARIO...] [--markdown]

The trainings are those of tests/frameworks/adapter_defects_job.py (the tiny.py defects of
`benchmarks/rule_defects.py`, redone in each framework), run in one subprocess per group of
adapters (Keras picks its backend at import). One row per (adapter, scenario): the rules
expected to fire, every rule that fired with the (global) step where it first fired, and
whether the row passes (healthy: no rule of the default set fired; defect: an expected rule
fired). Rules outside the default set are run by name too and marked *. Exit status 1 if a
row fails. `--only` matches substrings of scenario names; `--adapters` names adapters
(`keras-tensorflow tape-eager tape-graph keras-jax keras-torch jax-eager jax-jit jax-statistics`)
or groups (`tensorflow keras-jax keras-torch jax`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ROOT / "tests" / "frameworks"
sys.path.insert(0, str(JOBS))

from adapter_defects_job import EXTRA, GROUPS, SCENARIOS, SUSPICIONS, applies, as_expected, run_dir  # noqa: E402
from framework_jobs import QUIET_ENV  # noqa: E402

import mldbg  # noqa: E402

QUIET = {**QUIET_ENV, "PYTHONWARNINGS": "ignore"}


def train_group(out: Path, group: str, adapters: list[str], scenarios: list[str]) -> dict:
    """Train `scenarios` through `adapters` of `group` in one subprocess; {adapter: {scenario: s}}."""
    out.mkdir(parents=True, exist_ok=True)
    src = str(ROOT / "src")
    env = {**os.environ, **QUIET, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(JOBS / "adapter_defects_job.py"), str(out), "--group", group,
           "--adapters", *adapters, "--only", *scenarios]  # fmt: skip
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"group {group} failed ({proc.returncode}):\n{proc.stderr[-4000:]}", file=sys.stderr)
        return {}
    return json.loads((out / "manifest.json").read_text())


def first_firings(path: Path, name: str = "") -> tuple[dict[str, int], list]:
    """The first step of each rule reported on the run; for a row of `SUSPICIONS`, of its
    suspicions too (`mldbg.diagnose(...).unconfirmed`)."""
    diagnoses = mldbg.diagnose(str(path), rules=["default", *EXTRA])
    findings = list(diagnoses.findings)
    if name in SUSPICIONS:
        findings += [f for d in diagnoses.unconfirmed for f in d.findings]
    first: dict[str, int] = {}
    for f in findings:
        first[f.rule] = min(first.get(f.rule, f.step), f.step)
    return first, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapters", nargs="*", help="adapters or groups (default: all)")
    ap.add_argument("--only", nargs="*", help="substrings of scenario names")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--verbose", "-v", action="store_true")
    args = ap.parse_args()
    wanted = set(args.adapters or GROUPS)
    scenarios = [n for n in SCENARIOS if not args.only or any(o.lower() in n.lower() for o in args.only)]
    rows, failures = [], 0
    with tempfile.TemporaryDirectory() as tmp:
        for group, members in GROUPS.items():
            adapters = [a for a in members if group in wanted or a in wanted]
            if not adapters:
                continue
            t = time.perf_counter()
            seconds = train_group(Path(tmp) / group, group, adapters, scenarios)
            if not args.markdown:
                print(f"# {group}: trained in {time.perf_counter() - t:.0f}s", file=sys.stderr)
            for adapter in adapters:
                for name in scenarios:
                    if not applies(adapter, name):
                        continue
                    expected = SCENARIOS[name][1]
                    path = run_dir(Path(tmp) / group, adapter, name)
                    if name not in seconds.get(adapter, {}):
                        first, findings, ok = {}, [], False
                        fired = "(training failed)"
                    else:
                        first, findings = first_firings(path, name)
                        ok = as_expected(set(first), expected)
                        fired = (
                            ", ".join(
                                f"{r}{'*' if r in EXTRA else ''} @{s}"
                                for r, s in sorted(first.items(), key=lambda kv: kv[1])
                            )
                            or "-"
                        )
                    failures += not ok
                    rows.append(
                        (adapter, name, ", ".join(expected) or "nothing", fired, "yes" if ok else "NO")
                    )
                    if not args.markdown:
                        secs = seconds.get(adapter, {}).get(name, float("nan"))
                        print(
                            f"{'ok ' if ok else 'BAD'} {adapter:16s} {name:44s} expect "
                            f"{', '.join(expected) or 'nothing':40s} fired {fired}  ({secs:.1f}s)",
                            flush=True,
                        )
                        if args.verbose or not ok:
                            for f in findings:
                                print("      ", str(f).replace("\n", "\n       "))
    if args.markdown:
        print("| adapter | training | expected | fired (rule @ first step) | ok |")
        print("| --- | --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    print(f"\n{len(rows) - failures}/{len(rows)} as expected", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
