"""Which rule fires on which injected defect, and where: the default rule set of `mldbg check`
over tiny real PyTorch trainings, healthy ones and ones with a defect injected.

    .venv/bin/python benchmarks/rule_defects.py [--steps 100] [--markdown] [--only NAME...] [--default-hook]

Prints one row per training: the rules expected to fire, every rule that fired with the step
(global step) where it first fired, and whether the row passes (healthy: no rule of the
default set reported; defect: an expected rule reported, or for a row of `SUSPICIONS` listed
as a suspicion: `mldbg.diagnose(...).unconfirmed`, shown in parentheses). The model rules outside the default set
(confusion, overtraining, saturated_activation, check_input_images) are run by name too and
marked with *. Exit status 1 if a row fails. The table in docs/rules.md comes from `--markdown`.
`--default-hook` records each training with the two lines of the README (`Hook(out_dir)`: the
default statistics every step, raw tensors on the default save config) instead of every
collection saved every step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.defects import EXTRA, SCENARIOS, SUSPICIONS  # noqa: E402
from tests.tiny import train  # noqa: E402

import mldbg  # noqa: E402


def run(
    name: str, kwargs: dict, steps: int, root: Path, default_hook: bool = False
) -> tuple[list, list, float]:
    """(reported findings, suspicions: the findings of `mldbg.diagnose(...).unconfirmed`, seconds)."""
    kw = {"steps": steps, "default_hook": default_hook, **kwargs}
    path = root / name.replace(" ", "_").replace(",", "").replace("/", "_")
    train(path, **kw)
    t = time.perf_counter()
    diagnoses = mldbg.diagnose(str(path), rules=["default", *EXTRA])
    suspicions = [f for d in diagnoses.unconfirmed for f in d.findings]
    return diagnoses.findings, suspicions, time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--verbose", "-v", action="store_true")
    ap.add_argument("--default-hook", action="store_true", help="record with Hook(out_dir) defaults")
    args = ap.parse_args()
    failures = 0
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (kwargs, expected) in SCENARIOS.items():
            if args.only and not any(o.lower() in name.lower() for o in args.only):
                continue
            findings, suspicions, secs = run(name, kwargs, args.steps, Path(tmp), args.default_hook)
            first: dict[str, int] = {}
            for f in findings:
                first[f.rule] = min(first.get(f.rule, f.step), f.step)
            suspected: dict[str, int] = {}
            for f in suspicions:
                suspected[f.rule] = min(suspected.get(f.rule, f.step), f.step)
            default = [r for r in first if r not in EXTRA]
            caught = first if name not in SUSPICIONS else {**suspected, **first}
            ok = not default if not expected else any(r in caught for r in expected)
            failures += not ok
            fired = (
                ", ".join(
                    [
                        f"{r}{'*' if r in EXTRA else ''} @{s}"
                        for r, s in sorted(first.items(), key=lambda kv: kv[1])
                    ]
                    + [f"({r} @{s}, unconfirmed)" for r, s in sorted(suspected.items(), key=lambda kv: kv[1])]
                )
                or "-"
            )
            rows.append((name, ", ".join(expected) or "nothing", fired, "yes" if ok else "NO"))
            if not args.markdown:
                print(
                    f"{'ok ' if ok else 'BAD'} {name:40s} expect {', '.join(expected) or 'nothing':45s} fired {fired}  ({secs:.2f}s)"
                )
                if args.verbose or not ok:
                    for f in findings:
                        print("      ", str(f).replace("\n", "\n       "))
    if args.markdown:
        print("| training (tiny PyTorch run) | expected | fired (rule @ first step) | ok |")
        print("| --- | --- | --- | --- |")
        for r in rows:
            print("| " + " | ".join(r) + " |")
    print(f"\n{len(rows) - failures}/{len(rows)} as expected", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
