"""The rules that could not judge a run are one summary line in `mldbg run`, `status` and
`check`, with their true reasons on demand (issue #29 item 3): tiny real scripts, a model that
applies its ReLU as `clamp(min=0)` (no nn.ReLU module, no F.relu: dead_relu has nothing to
read) and computes its loss with F.cross_entropy."""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import torch
import torch.nn.functional as F
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.randn(64, 8)
y = (x[:, 0] > 0).long()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 2)

    def forward(self, x):
        return self.fc2(self.fc1(x).clamp(min=0))

model = Net()
{hook}
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(30):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
print("trained", flush=True)
"""
TWO_LINES = "import mldbg.torch\nhook = mldbg.torch.Hook({out!r})\nhook.register_module(model)"


def mldbg(*args, timeout=180):
    return subprocess.run([sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def lines_with(text, part):
    return [line for line in text.splitlines() if part in line]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One run under `mldbg run` (its output, the run), its --verbose output on a second run."""
    tmp = tmp_path_factory.mktemp("skips")
    train = tmp / "train.py"
    train.write_text(textwrap.dedent(SCRIPT.format(hook="")))
    out = tmp / "run"
    plain = mldbg("run", "--out", str(out), "--", sys.executable, str(train))
    verbose = mldbg("run", "--verbose", "--out", str(tmp / "run_v"), "--", sys.executable, str(train))
    return out, plain, verbose


def test_mldbg_run_says_what_could_not_judge_in_one_line(recorded):
    out, done, _ = recorded
    assert done.returncode == 0, done.stderr
    assert "trained" in done.stdout
    err = done.stderr
    assert not lines_with(err, " skipped: ")  # no line per skipped rule
    (line,) = lines_with(err, "could not judge this run")
    assert "rules ran over 30 steps, none fired" in line
    assert "dead_relu" in line and "9 profiler rules: no profiler data" in line
    assert "mldbg run --verbose says why" in line
    # nothing about what the script cannot have, nor advice for a hook it does not have
    for absent in ("tree_depth", "feature_importance", "include_collections", "0 findings from"):
        assert absent not in err


def test_mldbg_run_verbose_gives_the_true_reason_and_advice_for_mldbg_run(recorded):
    _, _, done = recorded
    assert done.returncode == 0, done.stderr
    err = done.stderr
    (relu,) = lines_with(err, "dead_relu skipped:")
    assert "no nn.ReLU module" in relu and "F.relu" in relu
    assert "include_collections" not in err  # mldbg run asked for every collection the rules read
    (profiler,) = lines_with(err, "profiler rules")
    assert "--hook-config" in profiler  # the way to turn it on under mldbg run, not a hook argument
    (labels,) = lines_with(err, "class_imbalance skipped:")
    assert "statistics: true" in labels
    assert "tree_depth" not in err


def test_status_lists_the_rules_that_ran_and_one_line_for_the_others(recorded):
    out, _, _ = recorded
    res = mldbg("status", str(out))
    assert res.returncode == 0, res.stderr
    assert not lines_with(res.stdout, "  skipped")
    assert "exploding_tensor" in res.stdout and "no issues found" in res.stdout
    (line,) = lines_with(res.stdout, "could not judge this run")
    assert "none fired" in line and "--verbose says why" in line
    assert "tree_depth" not in res.stdout and "include_collections" not in res.stdout

    verbose = mldbg("status", "--verbose", str(out))
    (relu,) = lines_with(verbose.stdout, "dead_relu")
    assert "skipped" in relu and "F.relu" in relu
    assert "tree_depth" not in verbose.stdout


def test_check_on_the_two_lines(tmp_path):
    out = tmp_path / "run"
    train = tmp_path / "train.py"
    train.write_text(textwrap.dedent(SCRIPT.format(hook=TWO_LINES.format(out=str(out)))))
    done = subprocess.run([sys.executable, str(train)], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    res = mldbg("check", str(out))
    assert res.returncode == 0, res.stderr
    (line,) = lines_with(res.stderr, "rules ran over")
    assert not lines_with(res.stderr, " skipped: ")
    assert f"rules ran over 30 steps of {out}, none fired" in line
    assert "could not judge this run" in line and "0 findings from" not in line
    assert "tree_depth" not in line
    verbose = mldbg("check", "--verbose", str(out))
    (relu,) = lines_with(verbose.stderr, "dead_relu skipped:")
    assert "F.relu" in relu
    # the two lines recorded every collection this model has: no include_collections advice
    assert "include_collections" not in verbose.stderr
    assert "tree_depth" not in verbose.stderr


def test_watch_says_what_could_not_judge_in_one_line(recorded):
    """`mldbg watch` of a finished run: the same one summary line, reasons with --verbose."""
    out, _, _ = recorded
    res = mldbg("watch", "--no-state", str(out))
    assert res.returncode == 0, res.stderr
    assert not lines_with(res.stderr, " skipped: ")
    (line,) = lines_with(res.stderr, "could not judge this run")
    assert "none fired" in line and "mldbg watch --verbose says why" in line
    assert "tree_depth" not in res.stderr
    verbose = mldbg("watch", "--no-state", "--verbose", str(out))
    assert verbose.returncode == 0, verbose.stderr
    (relu,) = lines_with(verbose.stderr, "dead_relu skipped:")
    assert "F.relu" in relu
