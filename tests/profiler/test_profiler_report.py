"""`mldbg profile-report`: a self-contained static page with every section, for a real CPU
run (with profiling windows) and a GPU-shaped run (with findings)."""

import re

import pytest
from click.testing import CliRunner
from profiler_runs import gpu_run, train

from mldbg.cli.main import cli
from mldbg.profiler import ProfilerConfig, ProfilerData
from mldbg.report.profiler import profiler_rules, write_report
from mldbg.rules.base import Finding
from mldbg.rules.profiler import ProfilerRule, svg

SECTIONS = ("summary", "verdicts", "system", "steps", "windows", "rules")
# the order the rules declare (`ProfilerRule.order`): RULES.md's
RULE_ORDER = (
    "low_gpu_utilization", "cpu_bottleneck", "io_bottleneck", "batch_size", "gpu_memory_increase",
    "load_balancing", "step_outlier", "max_initialization_time", "dataloader", "overall_system_usage",
)  # fmt: skip


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("report_cpu")
    train(path, steps=40, eval_steps=4, data_sleep=0.01, busy_seconds=0.8)
    return path


def assert_self_contained(html):
    assert html.startswith("<!doctype html>") and html.rstrip().endswith("</html>")
    assert "<script" not in html and "<link" not in html and "<iframe" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # no CDN, nothing fetched


def test_cpu_report_sections(cpu_run, tmp_path):
    out = write_report(cpu_run, tmp_path / "p.html")
    html = out.read_text()
    assert_self_contained(html)
    for s in SECTIONS:
        assert f'id="{s}"' in html, s
    for name in RULE_ORDER:
        assert f'id="rule-{name}"' in html, name
    assert "initialization" in html and "training loop" in html and "finalization" in html
    assert "p95" in html and "p99" in html and "cpu_busiest_core_percent" in html
    assert "step duration" in html and "phase breakdown" in html and "median" in html
    assert html.count("<svg") >= 6
    assert "Not evaluated: no GPU series" in html  # GPU rules on a CPU machine
    # the injected 10 ms loader: the dataloader section fired
    section = html.split('id="rule-dataloader"')[1].split("</section>")[0]
    assert "verdict fired" in section and "wait for data" in section


def test_cpu_report_windows(tmp_path):
    cfg = ProfilerConfig(
        system_interval_ms=None, torch_profiler=(2, 2), python_profiler=(5, 2), flush_seconds=0.25
    )
    train(tmp_path / "run", steps=10, config=cfg)
    html = write_report(tmp_path / "run", tmp_path / "p.html").read_text()
    assert "Top operators, torch.profiler, worker_0, steps 2-3" in html and "aten::" in html
    assert "Top Python functions, cProfile, worker_0, steps 5-6" in html
    assert ".trace.json.gz" in html
    assert "No system metrics were recorded" in html
    assert_self_contained(html)


def test_gpu_report_with_findings(tmp_path):
    path = gpu_run(tmp_path / "run", gpus=2, gpu_util=lambda i, g: 30.0 if g == 1 else 90.0)
    html = write_report(path, tmp_path / "p.html").read_text()
    assert_self_contained(html)
    assert "GPU 1 utilization" in html and "GPU 0 memory" in html
    for name in ("low_gpu_utilization", "load_balancing"):
        section = html.split(f'id="rule-{name}"')[1].split("</section>")[0]
        assert "verdict fired" in section and "<svg" in section, name
    ok = html.split('id="rule-cpu_bottleneck"')[1].split("</section>")[0]
    assert "verdict ok" in ok and "<svg" in ok


def test_cli(cpu_run, tmp_path):
    out = tmp_path / "profile.html"
    r = CliRunner().invoke(
        cli, ["profile-report", str(cpu_run), "-o", str(out), "--rule", "step_outlier:n_outliers=1000"]
    )
    assert r.exit_code == 0, r.output
    assert out.exists() and "n_outliers=1000" in out.read_text()
    r = CliRunner().invoke(cli, ["profile-report", str(tmp_path / "nothing"), "-o", str(tmp_path / "x.html")])
    assert r.exit_code == 2 and "the path does not exist" in r.output  # not "no profiler data"


def test_the_report_lists_the_registered_profiler_rules_in_their_order():
    assert [r.name for r in profiler_rules()] == list(RULE_ORDER)
    given = profiler_rules(["step_outlier:n_outliers=3", "dead_relu", "no_such_rule"])
    assert [r.name for r in given] == list(RULE_ORDER)
    assert next(r for r in given if r.name == "step_outlier").n_outliers == 3


class SlowSteps(ProfilerRule):
    """A user's own profiler rule: a training step took longer than `limit_ms`."""

    requires = "steps"
    order = 65  # between load_balancing and step_outlier
    limit_ms: float = 5.0

    def evaluate(self, data, final):
        for worker in data.workers():
            s = data.steps(worker)
            slow = s.duration * 1e3 > self.limit_ms
            if slow.any():
                yield worker, self.make(data, f"{int(slow.sum())} steps over {self.limit_ms:g} ms", step=0)

    def chart(self, data, t0):
        s = data.steps(data.workers()[0])
        line = ("step duration", s.step.astype(float), s.duration * 1e3)
        return svg.line_chart([line], "step", "ms", hlines=[(self.limit_ms, "slow-steps-limit")])


def test_a_new_profiler_rule_brings_its_chart(cpu_run, tmp_path):
    html = write_report(cpu_run, tmp_path / "p.html", rules=[SlowSteps(limit_ms=0.0)]).read_text()
    ids = re.findall(r'id="rule-([a-z_]+)"', html)
    assert ids == [*RULE_ORDER[:6], "slow_steps", *RULE_ORDER[6:]]
    section = html.split('id="rule-slow_steps"')[1].split("</section>")[0]
    assert "verdict fired" in section and "steps over 0 ms" in section
    assert "<svg" in section and "slow-steps-limit" in section


def test_a_profiler_rule_can_be_reused_after_reset(cpu_run):
    rule = SlowSteps(limit_ms=0.0)
    data = ProfilerData(cpu_run)
    (first,) = rule.run(data)
    assert rule.run(data) == []  # a condition is reported once
    rule.reset()
    assert rule.run(data) == [first] and isinstance(first, Finding)
