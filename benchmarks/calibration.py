"""The calibration corpus (issue 26): how often the default rules alarm on healthy trainings of
many kinds, and how often they catch the buggy twins, on the tune half and the held-out half.

    .venv/bin/python benchmarks/calibration.py [--split tune|heldout|fresh|blind|all] [--jobs N]
        [--only NAME]... [--which healthy|buggy|all] [--list] [--no-save]
    .venv/bin/python benchmarks/calibration.py --from-json benchmarks/results/calibration_tune.json \
        benchmarks/results/calibration_heldout.json

Every pipeline of benchmarks/corpus/ (a small real PyTorch training recorded with the README's
two lines) trains in its own worker process (one CPU thread), then `mldbg.check(path)` judges
it with the default rule set (and `mldbg.diagnose(path)` where the library has it). A healthy
run is *alarmed* when any finding comes back; a buggy run is *caught* when any finding comes
back, and *caught as expected* when one of the rules its bug is annotated with fired.

The split is fixed by the SHA-1 of each pipeline's name (`corpus.split`), decided in code
before any result is seen: tune rules on `tune`, and quote `heldout` as the figure. `fresh` is a
second held-out set (the modules with `SPLIT = "fresh"`, written after `heldout` had been looked
at): `--split fresh` measures it alone; `all` includes it. `blind` is a third (`SPLIT = "blind"`,
written after `fresh` had been looked at).

Writes benchmarks/results/calibration_<split>.json and .md (not with --no-save, nor with --only
unless --stem names the files);
`--from-json` merges saved runs (the two halves) into calibration_all.json and .md.
Each training takes 0.5-6 s on a quiet core (the whole corpus about 10 minutes with --jobs 2
on a shared 2-core machine, most of it starting workers and importing torch). Mind the
`__main__` guard when calling `run()` from another script: workers start from a fork server.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import fnmatch
import json
import multiprocessing
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import corpus  # noqa: E402

RESULTS = HERE / "results"


def _median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x == x and abs(x) != float("inf")]
    return statistics.median(xs) if xs else None


def run_one(name: str) -> dict[str, Any]:
    """Train one pipeline in a temporary folder, judge it, and return its record (plain data,
    so it crosses the process boundary). A crash of the training or of mldbg is recorded in
    `error`, not raised."""
    import torch

    import mldbg
    from mldbg.rules.runner import RuleRunner

    torch.set_num_threads(1)
    p = corpus.pipelines()[name]
    rec: dict[str, Any] = {
        "name": name, "kind": p.kind, "split": p.split, "healthy": p.healthy, "bug": p.bug,
        "cause": p.cause, "expected": list(p.expected), "twin": p.twin, "error": None,
        "findings": [], "rule_errors": [], "diagnoses": None,
    }  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mldbg-calibration-") as tmp:
        path = str(Path(tmp) / "run")
        t0 = time.perf_counter()
        try:
            losses = p.train(path)
        except Exception:
            rec["error"] = "training: " + traceback.format_exc(limit=6)
            return rec
        t1 = time.perf_counter()
        k = max(1, len(losses) // 10)
        rec.update(
            train_s=round(t1 - t0, 2), points=len(losses),
            loss_first=_median(losses[:k]), loss_last=_median(losses[-k:]),
        )  # fmt: skip
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                runner = RuleRunner(path)
                findings = runner.run_available() + runner.finish()
                for rule, err in runner.errors.items():
                    warnings.warn(f"mldbg: rule {rule} failed: {err}", RuntimeWarning, stacklevel=1)
                judged = sorted({r.name for r in runner.rules} - set(runner.skipped) - set(runner.errors))
                diagnose = getattr(mldbg, "diagnose", None)
                # the rules' findings grouped once (what `mldbg.check(path)` returns are those
                # of the reported diagnoses; the suspicions below the bar are kept apart)
                diagnoses = diagnose(findings, trial=path) if diagnose is not None else None
                unconfirmed = list(getattr(diagnoses, "unconfirmed", []))
                if diagnoses is not None:
                    findings = diagnoses.reported_of(findings)
            rec["rule_errors"] = sorted({str(w.message) for w in caught if "mldbg: rule" in str(w.message)})
        except Exception:
            rec["error"] = "mldbg.check: " + traceback.format_exc(limit=8)
            return rec
        rec["check_s"] = round(time.perf_counter() - t1, 2)
        rec["judged"] = judged  # the rules that reached a verdict (not skipped, no error)
        rec["findings"] = [
            {"rule": f.rule, "step": int(f.step), "severity": f.severity, "message": str(f.message)[:300]}
            for f in findings
        ]
        rec["unconfirmed"] = [
            {
                "cause": d.cause,
                "confidence": float(d.confidence),
                "rules": sorted({f.rule for f in d.findings}),
            }
            for d in unconfirmed
        ]
        if diagnoses is not None:
            rec["diagnoses"] = [
                {
                    "cause": d.cause,
                    "step": int(d.step),
                    "confidence": float(d.confidence),
                    "severity": d.severity,
                    "advice": str(d.advice)[:300],
                    "rules": sorted({f.rule for f in d.findings}),
                }  # fmt: skip
                for d in diagnoses
            ]
    return rec


def fired(rec: dict[str, Any], errors_only: bool = False) -> dict[str, int]:
    """Rule -> the first step it fired at."""
    out: dict[str, int] = {}
    for f in rec["findings"]:
        if errors_only and f["severity"] != "error":
            continue
        out[f["rule"]] = min(out.get(f["rule"], f["step"]), f["step"])
    return out


def verdict(rec: dict[str, Any]) -> dict[str, bool]:
    rules = fired(rec)
    if rec["healthy"]:
        return {"alarmed": bool(rules), "alarmed_error": bool(fired(rec, errors_only=True))}
    causes = {d["cause"] for d in rec["diagnoses"] or []}
    return {
        "caught": bool(rules),
        "caught_expected": any(r in rules for r in rec["expected"]),
        "cause_named": rec["cause"] in causes,
    }


def beyond_twin(rec: dict[str, Any], by_name: dict[str, dict[str, Any]]) -> set[str] | None:
    """The rules that fired on a buggy run and not on its healthy twin (None: the twin's
    record is not among these runs, or it crashed)."""
    twin = by_name.get(rec["twin"] or "")
    if twin is None or twin["error"] is not None:
        return None
    return set(fired(rec)) - set(fired(twin))


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per split (and `all`): healthy runs alarmed and by which rules, buggy runs caught."""
    out: dict[str, Any] = {}
    by_name = {r["name"]: r for r in records}
    for split in (*corpus.ALL_SPLITS, "all"):
        rs = [r for r in records if split in ("all", r["split"]) and r["error"] is None]
        healthy = [r for r in rs if r["healthy"]]
        bugs = [r for r in rs if not r["healthy"]]
        with_diag = [r for r in rs if r["diagnoses"] is not None]
        twinned = [b for b in (beyond_twin(r, by_name) for r in bugs) if b is not None]
        out[split] = {
            "healthy_runs": len(healthy),
            "healthy_alarmed": sum(verdict(r)["alarmed"] for r in healthy),
            "healthy_alarmed_error": sum(verdict(r)["alarmed_error"] for r in healthy),
            "healthy_rule_alarms": dict(Counter(rule for r in healthy for rule in fired(r)).most_common()),
            "buggy_runs": len(bugs),
            "buggy_caught": sum(verdict(r)["caught"] for r in bugs),
            "buggy_caught_expected": sum(verdict(r)["caught_expected"] for r in bugs),
            "buggy_rule_hits": dict(Counter(rule for r in bugs for rule in fired(r)).most_common()),
            "buggy_findings_median": _median([len(fired(r)) for r in bugs]),
            "buggy_with_twin": len(twinned),
            "buggy_caught_beyond_twin": sum(bool(b) for b in twinned),
            "crashed": sum(1 for r in records if split in ("all", r["split"]) and r["error"] is not None),
            "diagnosed_runs": len(with_diag),
            "healthy_diagnosed": sum(1 for r in with_diag if r["healthy"] and r["diagnoses"]),
            "buggy_diagnoses_median": _median([len(r["diagnoses"]) for r in with_diag if not r["healthy"]]),
            "buggy_cause_named": sum(verdict(r)["cause_named"] for r in with_diag if not r["healthy"]),
        }
    return out


def rule_rates(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per rule, over the healthy runs it reached a verdict on (`judged`): the runs, their
    training steps, the runs it alarmed on, and the false-alarm rate per 10^6 training steps
    with its one-sided 95% upper bound (exact Poisson: chi2(0.95, 2k + 2) / 2 alarms)."""
    from scipy.stats import chi2

    out: dict[str, dict[str, float]] = {}
    healthy = [r for r in records if r["healthy"] and r["error"] is None and "judged" in r]
    for rule in sorted({x for r in healthy for x in r["judged"]}):
        runs = [r for r in healthy if rule in r["judged"]]
        steps = sum(int(r.get("points") or 0) for r in runs)
        alarms = sum(1 for r in runs if rule in fired(r))
        bound = chi2.ppf(0.95, 2 * alarms + 2) / 2
        out[rule] = {
            "runs": len(runs), "steps": steps, "alarmed_runs": alarms,
            "per_1e6_steps": 1e6 * alarms / steps if steps else float("nan"),
            "per_1e6_steps_95": 1e6 * bound / steps if steps else float("nan"),
            "per_run_95": bound / len(runs),
        }  # fmt: skip
    return out


def _frac(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "-"


def markdown(records: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    s = summarize(records)
    splits = [
        sp for sp in corpus.ALL_SPLITS if s[sp]["healthy_runs"] + s[sp]["buggy_runs"] + s[sp]["crashed"]
    ]
    cols = [*splits, "all"] if len(splits) > 1 else splits
    lines = [
        "# Calibration corpus: the default rules on healthy and buggy trainings",
        "",
        f"Command: `{meta['command']}`  ",
        f"mldbg at `{meta['commit']}`, torch {meta['torch']}, {meta['date']}, {meta['jobs']} worker(s).  ",
        "A healthy run is *alarmed* by any finding of `mldbg.check(path)` (default rules); a buggy run is "
        "*caught* by any finding, *as expected* when one of the rules annotated for its bug fired.",
        "",
        "| | " + " | ".join(cols) + " |",
        "| --- | " + " | ".join("---" for _ in cols) + " |",
        "| healthy runs alarmed (any finding) | " + " | ".join(_frac(s[c]["healthy_alarmed"], s[c]["healthy_runs"]) for c in cols) + " |",
        "| healthy runs alarmed (an `error` finding) | " + " | ".join(_frac(s[c]["healthy_alarmed_error"], s[c]["healthy_runs"]) for c in cols) + " |",
        "| buggy runs caught (any finding) | " + " | ".join(_frac(s[c]["buggy_caught"], s[c]["buggy_runs"]) for c in cols) + " |",
        "| buggy runs caught by an expected rule | " + " | ".join(_frac(s[c]["buggy_caught_expected"], s[c]["buggy_runs"]) for c in cols) + " |",
        "| buggy runs caught by a rule quiet on their healthy twin (twin in these runs) | " + " | ".join(_frac(s[c]["buggy_caught_beyond_twin"], s[c]["buggy_with_twin"]) for c in cols) + " |",
        "| rules firing per buggy run (median) | " + " | ".join(str(s[c]["buggy_findings_median"]) for c in cols) + " |",
        "| runs that crashed (training or mldbg) | " + " | ".join(str(s[c]["crashed"]) for c in cols) + " |",
    ]  # fmt: skip
    if any(s[c]["diagnosed_runs"] for c in cols):
        lines += [
            "| healthy runs with a diagnosis | " + " | ".join(str(s[c]["healthy_diagnosed"]) for c in cols) + " |",
            "| diagnoses per buggy run (median) | " + " | ".join(str(s[c]["buggy_diagnoses_median"]) for c in cols) + " |",
            "| buggy runs whose cause is named | " + " | ".join(_frac(s[c]["buggy_cause_named"], s[c]["buggy_runs"]) for c in cols) + " |",
        ]  # fmt: skip
    rules = sorted(
        {r for c in cols for r in (*s[c]["healthy_rule_alarms"], *s[c]["buggy_rule_hits"])},
        key=lambda r: (-s["all"]["healthy_rule_alarms"].get(r, 0), r),
    )
    lines += [
        "",
        "## Per rule: healthy runs it alarmed on (false alarms), buggy runs it fired on",
        "",
        "| rule | " + " | ".join(f"healthy alarmed, {c}" for c in cols) + " | " + " | ".join(f"buggy fired, {c}" for c in cols) + " |",
        "| --- | " + " | ".join("---" for _ in cols * 2) + " |",
    ]  # fmt: skip
    for r in rules:
        lines.append(
            f"| `{r}` | "
            + " | ".join(str(s[c]["healthy_rule_alarms"].get(r, 0)) for c in cols)
            + " | "
            + " | ".join(str(s[c]["buggy_rule_hits"].get(r, 0)) for c in cols)
            + " |"
        )
    rates = rule_rates(records)
    if rates:
        lines += [
            "",
            "## Per rule: false alarms on the healthy runs it judged",
            "",
            "Each rule over the healthy runs where it reached a verdict (its data recorded, not "
            "skipped): the alarms, the rate per 10^6 training steps of those runs, and the one-sided "
            "95% upper bound of the rate (exact Poisson), per 10^6 steps and per run.",
            "",
            "| rule | healthy runs judged | training steps | runs alarmed | per 10^6 steps | 95% bound per 10^6 steps | 95% bound per run |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]  # fmt: skip
        for rule, x in sorted(rates.items(), key=lambda kv: (-kv[1]["alarmed_runs"], kv[0])):
            lines.append(
                f"| `{rule}` | {x['runs']} | {x['steps']:,} | {x['alarmed_runs']} | {x['per_1e6_steps']:.0f} | "
                f"{x['per_1e6_steps_95']:.0f} | {x['per_run_95']:.3f} |"
            )
    for title, healthy in (("Healthy runs", True), ("Buggy runs", False)):
        lines += ["", f"## {title}", ""]
        if healthy:
            lines += [
                "| run | split | kind | loss first -> last | fired (rule @ first step) | alarmed |",
                "| --- | --- | --- | --- | --- | --- |",
            ]
        else:
            lines += ["| run | split | bug (cause) | expected (any of) | fired (rule @ first step) | caught |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for rec in sorted(
            (r for r in records if r["healthy"] == healthy), key=lambda r: (r["split"], r["name"])
        ):
            rules_at = (
                ", ".join(f"{k} @{v}" for k, v in sorted(fired(rec).items(), key=lambda kv: kv[1])) or "-"
            )
            if rec["error"] is not None:
                rules_at, mark = (
                    "CRASHED: " + rec["error"].strip().splitlines()[-1][:120].replace("|", "/"),
                    "?",
                )
            else:
                v = verdict(rec)
                mark = (
                    ("yes" if v["alarmed"] else "no")
                    if healthy
                    else ("expected" if v["caught_expected"] else "other rules" if v["caught"] else "NO")
                )
            if healthy:
                lf, ll = rec.get("loss_first"), rec.get("loss_last")
                loss = f"{lf:.3g} -> {ll:.3g}" if lf is not None and ll is not None else "-"
                lines.append(
                    f"| {rec['name']} | {rec['split']} | {rec['kind']} | {loss} | {rules_at} | {mark} |"
                )
            else:
                lines.append(
                    f"| {rec['name']} | {rec['split']} | {rec['bug']} ({rec['cause']}) | {', '.join(rec['expected'])} | {rules_at} | {mark} |"
                )
    return "\n".join(lines) + "\n"


def _meta(jobs: int) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    try:
        import torch

        torch_version = torch.__version__
    except ImportError:
        torch_version = "-"
    return {
        "command": "python benchmarks/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "commit": commit, "torch": torch_version, "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "jobs": jobs,
    }  # fmt: skip


def select(names: list[str], split: str, which: str, only: list[str] | None) -> list[str]:
    ps = corpus.pipelines()
    out = []
    for n in names:
        p = ps[n]
        if split != "all" and p.split != split:
            continue
        if which != "all" and p.healthy != (which == "healthy"):
            continue
        if only and not any(n == o or fnmatch.fnmatch(n, o) for o in only):
            continue
        out.append(n)
    return out


def run(names: list[str], jobs: int, progress: bool = True) -> list[dict[str, Any]]:
    """Each pipeline in a fresh worker process: no state is shared between runs. Workers fork
    from a server that imported torch and mldbg once (and never ran anything)."""
    records = []
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["torch", "mldbg.torch", "corpus", "calibration"])
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, max_tasks_per_child=1) as pool:
        futures = {pool.submit(run_one, n): n for n in names}
        for i, fut in enumerate(cf.as_completed(futures), 1):
            name = futures[fut]
            try:
                rec = fut.result()
            except Exception:  # the worker died (killed, out of memory)
                p = corpus.pipelines()[name]
                rec = {
                    "name": name, "kind": p.kind, "split": p.split, "healthy": p.healthy, "bug": p.bug,
                    "cause": p.cause, "expected": list(p.expected), "twin": p.twin, "findings": [],
                    "rule_errors": [], "diagnoses": None, "error": "worker: " + traceback.format_exc(limit=3),
                }  # fmt: skip
            records.append(rec)
            if progress:
                state = "CRASHED" if rec["error"] else ", ".join(sorted(fired(rec))) or "-"
                print(
                    f"[{i}/{len(names)}] {name} ({rec['split']}, {rec.get('train_s', '?')}s): {state}",
                    file=sys.stderr,
                    flush=True,
                )
    # the fork server and its resource tracker stay up for the caller's whole life otherwise:
    # processes of ours beside whatever the caller does next (the profiler counts them as data
    # loaders); both start again on demand
    for module, name in (
        (multiprocessing.forkserver, "_forkserver"),
        (multiprocessing.resource_tracker, "_resource_tracker"),
    ):
        stop = getattr(getattr(module, name, None), "_stop", None)
        if stop is not None:
            stop()
    return sorted(records, key=lambda r: r["name"])


def save(records: list[dict[str, Any]], meta: dict[str, Any], stem: str, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    data = {"meta": meta, "summary": summarize(records), "rule_rates": rule_rates(records), "runs": records}
    (out / f"{stem}.json").write_text(json.dumps(data, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(records, meta))
    print(f"wrote {out / stem}.json and .md", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", choices=(*corpus.ALL_SPLITS, "all"), default="all")
    ap.add_argument("--which", choices=("healthy", "buggy", "all"), default="all")
    ap.add_argument("--only", action="append", help="a pipeline name or glob (repeatable)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--list", action="store_true", help="list the pipelines with their split, kind and bug")
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    ap.add_argument("--from-json", nargs="+", type=Path, help="merge saved runs into calibration_all")
    ap.add_argument(
        "--stem",
        default=None,
        help="the results' file name (--from-json: default calibration_all; with --only: saved only when given)",
    )
    args = ap.parse_args(argv)
    if args.from_json:
        records, metas = {}, []
        for f in args.from_json:
            data = json.loads(f.read_text())
            metas.append(data["meta"])
            records.update({r["name"]: r for r in data["runs"]})
        meta = _meta(max(m["jobs"] for m in metas))
        meta["commit"] = ", ".join(sorted({m["commit"] for m in metas}))  # where the runs were judged
        meta["date"] = ", ".join(sorted({m["date"] for m in metas}))
        recs = sorted(records.values(), key=lambda r: r["name"])
        print(markdown(recs, meta))
        if not args.no_save:
            save(recs, meta, args.stem or "calibration_all", args.out)
        return 0
    names = select(list(corpus.pipelines()), args.split, args.which, args.only)
    if args.list:
        ps = corpus.pipelines()
        for n in names:
            p = ps[n]
            bug = f"bug {p.bug} -> {p.cause}; expect any of {', '.join(p.expected)}" if p.bug else "healthy"
            print(f"{n:55s} {p.split:8s} {p.kind:15s} {bug}")
        c = Counter((ps[n].split, ps[n].healthy) for n in names)
        counts = ", ".join(f"{sp} {c[sp, True]} healthy + {c[sp, False]} buggy" for sp in corpus.ALL_SPLITS)
        print(f"\n{len(names)} pipelines: {counts}")
        return 0
    if not names:
        print("no pipeline selected", file=sys.stderr)
        return 2
    meta = _meta(args.jobs)
    records = run(names, args.jobs)
    print(markdown(records, meta))
    if not args.no_save and (args.stem or not args.only):
        default = f"calibration_{args.split}" + ("" if args.which == "all" else f"_{args.which}")
        save(records, meta, args.stem or default, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
