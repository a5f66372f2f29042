"""`make bench`: run every benchmark of BENCHMARKS.md and splice their sections into it.

    python benchmarks/run_all.py [--setup] [--quick] [--only overhead,limit,...]

`--setup` (also done when missing) creates the peers' venv `.bench-venvs/smdebug` with
smdebug 1.0.34, TensorBoard and the same torch, so mldbg's and smdebug's environments never
mix. Each script writes `benchmarks/results/<name>.md`; this script replaces the block between
`<!-- bench:<name> -->` and `<!-- /bench:<name> -->` in BENCHMARKS.md with it. Results of
scripts owned by others (rules_throughput.py, ...) are spliced in the same way when present.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

import report

PEER_PACKAGES = [
    "smdebug==1.0.34",
    "numpy<2",
    "pandas<2.3",
    "requests",
    "psutil",
    "torch==2.13.0",
    "tensorboard",
]

# result name -> (script, arguments, quick arguments)
SCRIPTS: dict[str, tuple[str, list[str], list[str]]] = {
    "overhead": ("overhead", [], ["--steps", "200", "--rounds", "2"]),
    "overhead_static": (
        "overhead",
        ["--malloc", "static", "--name", "overhead_static"],
        ["--malloc", "static", "--name", "overhead_static", "--steps", "200", "--rounds", "2"],
    ),
    "hook_cpu": (
        "hook_cpu",
        ["--chunks", "6", "--chunk-steps", "200", "--name", "hook_cpu"],
        ["--chunks", "2", "--chunk-steps", "200", "--name", "hook_cpu"],
    ),
    "limit": ("limit", [], ["--repeat", "3", "--large-count", "4"]),
    "reading": ("reading", [], ["--steps", "2000", "--repeat", "3"]),
    "storage": ("storage", [], ["--steps", "20"]),
    "memory": ("memory", [], ["--steps", "100", "--rounds", "1"]),
    "sweep_throughput": ("sweep_throughput", [], ["--runs", "10", "--repeat", "2"]),
    "dashboard_latency": ("dashboard_latency", [], ["--steps", "200", "--requests", "20"]),
    "tensorboard_export": ("tensorboard_export", [], ["--steps", "200", "--repeat", "3"]),
}
# other engineers' figures: name -> (their doc, the heading of the section to include)
OTHERS = {"rules_throughput": ("docs/benchmarks/rules.md", "## Rule-runner throughput")}


def setup_peers() -> None:
    python = report.BENCH_VENV / "bin" / "python"
    if python.exists():
        return
    print(f"creating {report.BENCH_VENV} (smdebug 1.0.34, tensorboard, torch 2.13.0)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(report.BENCH_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES], check=True)


def splice(markdown: str, name: str, section: str) -> str:
    begin, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{begin}\n{section.rstrip()}\n{end}"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if pattern.search(markdown):
        return pattern.sub(lambda _: block, markdown)
    return markdown.rstrip() + f"\n\n{block}\n"


def section_of(path, heading: str) -> str:
    """The text under `heading` in a markdown file, up to the next heading of its level."""
    if not path.exists():
        return ""
    lines = path.read_text().splitlines()
    level = heading.split(" ")[0] + " "
    try:
        start = lines.index(heading) + 1
    except ValueError:
        return ""
    end = next((i for i in range(start, len(lines)) if lines[i].startswith(level)), len(lines))
    return "\n".join(lines[start:end]).strip()


def summary() -> str:
    """Every figure of issue 9 next to its target, from benchmarks/results/*.json."""
    import json

    def load(name: str) -> dict:
        p = report.RESULTS / f"{name}.json"
        return json.loads(p.read_text()) if p.exists() else {}

    rows: list[list[object]] = []
    for result, policy in (("overhead", "default malloc"), ("overhead_static", "fixed malloc")):
        ov = {r["label"]: r for r in load(result).get("rows", [])}
        for s, target in (("a", 1.10), ("b", 1.02), ("c", 1.01), ("d", 1.01)):
            if s in ov:
                r = ov[s]
                ok = "met" if r["ratio"] <= target else "not met"
                cpu_ok = "met" if r["cpu_ratio"] <= target else "not met"
                rows.append([f"overhead ({s}), {policy}: wall (rounds) / CPU",
                             f"{r['ratio']:.3f}x ({r['ratio_spread']}) / {r['cpu_ratio']:.3f}x",
                             f"<= {target:.2f}x", f"{ok} / {cpu_ok}"])  # fmt: skip
        if "a" in ov and "smdebug a" in ov:
            w, c = (
                ov["smdebug a"][k] / ov["a"][k] if ov["a"][k] > 0 else float("inf")
                for k in ("added_ms", "added_cpu_ms")
            )
            shown = [f"{v:.1f}x" if v != float("inf") else "(mldbg added none)" for v in (w, c)]
            rows.append([f"smdebug's added time / mldbg's in (a), {policy}: wall / CPU", " / ".join(shown), ">= 3x",
                         f"{'met' if w >= 3 else 'not met'} / {'met' if c >= 3 else 'not met'}"])  # fmt: skip
    hc = load("hook_cpu")
    for r in hc.get("rows", []):
        rows.append([f"hook's added CPU in one process ({r['scenario']}): all threads / training thread",
                     f"{r['added_cpu_ms'] / hc['baseline_cpu_ms'] * 100:+.1f}% / {r['added_main_ms'] / hc['baseline_cpu_ms'] * 100:+.1f}%",
                     "", ""])  # fmt: skip
    lim = load("limit")
    if lim:
        f = lim["floor"]
        rows.append(
            [
                "(a) bytes per saved step; memcpy + write floor",
                f"{f['bytes'] / 1e6:.1f} MB; {f['floor_ms']:.1f} ms",
                "",
                "",
            ]
        )
        if "added_cpu_per_saved_step_ms" in lim:
            rows.append(
                [
                    "(a) mldbg's added CPU per saved step / the floor's CPU",
                    f"{lim['added_cpu_per_saved_step_ms'] / f['floor_cpu_ms']:.2f}x",
                    "",
                    "",
                ]
            )
        for t in lim["throughput"]:
            rows.append([f"large-tensor write throughput vs dd ({'written through' if t['drop_cache'] else 'page cache'})",
                         f"{t['ratio'] * 100:.0f}% ({t['mldbg_mbs']:.0f} vs {t['dd_mbs']:.0f} MB/s)", ">= 70%",
                         "met" if t["ratio"] >= 0.7 else "not met"])  # fmt: skip
    rd = load("reading")
    if rd:
        rows.append([f"open {rd['settings']['steps']:,} steps x {rd['settings']['tensors']} tensors", f"{rd['open_ms']:.0f} ms", "< 1 s",
                     "met" if rd["open_ms"] < 1000 else "not met"])  # fmt: skip
        rows.append(["value() warm / cold", f"{rd['value_warm_ms'] * 1e3:.0f} µs / {rd['value_cold_ms']:.2f} ms", "< 1 ms warm",
                     "met" if rd["value_warm_ms"] < 1 else "not met"])  # fmt: skip
        rows.append(["refresh() after 10 new steps", f"{rd['refresh_10_steps_ms']:.1f} ms", "", ""])
    st = {r["tool"]: r for r in load("storage").get("rows", [])}
    if "mldbg" in st and "smdebug" in st:
        rows.append(["storage per saved step, mldbg / smdebug",
                     f"{st['mldbg']['bytes'] / st['mldbg']['saved_steps'] / 1e6:.2f} / {st['smdebug']['bytes'] / st['smdebug']['saved_steps'] / 1e6:.2f} MB; "
                     f"{st['mldbg']['files'] / st['mldbg']['saved_steps']:.2f} / {st['smdebug']['files'] / st['smdebug']['saved_steps']:.2f} files", "", ""])  # fmt: skip
    mem = {r["kind"]: r for r in load("memory").get("rows", [])}
    if mem:
        rows.append(["(a) extra peak RSS", f"{mem['normal']['extra_peak_mb']:+.0f} MB", "", ""])
        rows.append(["(a) extra peak RSS, slow disk, 64 MiB bound (block / drop)",
                     f"{mem['block']['extra_peak_mb']:+.0f} / {mem['drop']['extra_peak_mb']:+.0f} MB", "bounded", ""])  # fmt: skip
    return report.table(["figure", "measured (median)", "target", ""], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="only create the peers' venv")
    ap.add_argument("--quick", action="store_true", help="fewer steps and rounds (minutes, not an hour)")
    ap.add_argument("--only", default="", help="comma list of scripts to run")
    ap.add_argument("--splice-only", action="store_true", help="rewrite BENCHMARKS.md from existing results")
    args = ap.parse_args()
    setup_peers()
    if args.setup:
        return
    only = [s for s in args.only.split(",") if s] or list(SCRIPTS)
    if not args.splice_only:
        for name in only:
            script, full, quick = SCRIPTS[name]
            cmd = [
                sys.executable,
                str(report.ROOT / "benchmarks" / f"{script}.py"),
                *(quick if args.quick else full),
            ]
            print(f"== {' '.join(cmd)}", flush=True)
            t0 = time.time()
            subprocess.run(cmd, check=True, cwd=report.ROOT)
            print(f"== {name}: {time.time() - t0:.0f} s", flush=True)
    path = report.ROOT / "BENCHMARKS.md"
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    for name in SCRIPTS:
        md = report.RESULTS / f"{name}.md"
        if md.exists():
            text = splice(text, name, md.read_text())
    for name, (doc, heading) in OTHERS.items():
        section = section_of(report.ROOT / doc, heading)
        if section:
            text = splice(text, name, f"(From {doc}, measured by its author.)\n\n{section}")
    text = splice(text, "summary", summary())
    path.write_text(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
