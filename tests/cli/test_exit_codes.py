"""One convention for every command (issue 15): exit 0 clean, 1 a rule found an error, 2 a
usage error printed as one line `mldbg <command>: error: ...` with no traceback; warnings
(machine-dependent findings) fail only with --strict; `mldbg run --fail-on-finding` for CI.
Driven through the real command, in subprocesses and through the click group, on tiny real runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.tiny import train

from mldbg.cli.main import cli


def mldbg(
    *args: str, cwd: str | Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mldbg.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)  # fmt: skip


def one_line_error(stderr: str, command: str) -> str:
    """The usage error of `command`: exactly one line, in the fixed form, no traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"mldbg {command}: error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny real training with an eval pass every 10 steps, saved every 5 steps."""
    path = tmp_path_factory.mktemp("runs") / "cnn"
    train(path, steps=30, save_interval=5, eval_every=10)
    return path


def test_missing_paths_files_and_empty_folders_are_usage_errors(real_run, tmp_path):
    """A missing path, a file and a folder with no run: exit 2, one line naming the path, for
    every command that reads a run (profile-report says the path does not exist, and does not
    blame missing profiler data)."""
    missing = str(tmp_path / "no" / "such" / "path")
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    runner = CliRunner()
    for args in (["ls", missing], ["show", missing, "fc1.weight"], ["check", missing],
                 ["report", missing], ["profile-report", missing], ["plot", missing, "distribution", "x"],
                 ["export-tensorboard", missing, str(tmp_path / "tb")]):  # fmt: skip
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        line = one_line_error(res.stderr, args[0])
        assert f"no run at {missing}: the path does not exist" in line, line
        assert "profiler" not in line
    for args in (["check", str(script)], ["ls", str(script)], ["watch", str(script)]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        assert f"{script} is a file, not a run" in one_line_error(res.stderr, args[0])
    for args in (["check", str(empty)], ["ls", str(empty)], ["show", str(empty), "x"]):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, (args, res.output)
        assert f"no run at {empty}: nothing was recorded there" in one_line_error(res.stderr, args[0])
    # a folder of runs (a sweep) names them and the command that checks them all
    res = runner.invoke(cli, ["check", str(real_run.parent)])
    line = one_line_error(res.stderr, "check")
    assert res.exit_code == 2 and str(real_run) in line and f"mldbg sweep {real_run.parent}" in line


def test_the_real_command_in_a_subprocess(real_run, tmp_path):
    """The console command itself: one line and exit 2, not click's `Error:` nor a traceback."""
    res = mldbg("ls", str(tmp_path / "missing"))
    assert res.returncode == 2
    one_line_error(res.stderr, "ls")
    res = mldbg("profile-report", str(tmp_path / "missing"), "-o", str(tmp_path / "p.html"))
    assert res.returncode == 2 and "the path does not exist" in one_line_error(res.stderr, "profile-report")
    res = mldbg("show", str(real_run), "fc1.weights")
    line = one_line_error(res.stderr, "show")
    assert res.returncode == 2 and "did you mean 'fc1.weight'?" in line
    assert "tensor_names" not in line and "()" not in line  # no Python method for a CLI user
    res = mldbg("chek", str(real_run))
    assert res.returncode == 2 and "did you mean check?" in res.stderr and "Traceback" not in res.stderr
    res = mldbg("check", str(real_run), "--bogus")
    assert res.returncode == 2
    assert "--bogus" in one_line_error(res.stderr, "check")


def test_bad_rules_parameters_and_files_are_usage_errors(real_run, tmp_path):
    runner = CliRunner()
    res = runner.invoke(cli, ["check", str(real_run), "--rule", "loss_not_decreasing:num_steps=-5"])
    line = one_line_error(res.stderr, "check")
    assert res.exit_code == 2 and "num_steps=-5 is out of range: it must be >= 1" in line
    res = runner.invoke(cli, ["check", str(real_run), "--rule", "dead_relu:threshold_layer=150"])
    assert res.exit_code == 2 and "between 0 and 100" in one_line_error(res.stderr, "check")
    res = runner.invoke(cli, ["check", str(real_run), "--rule", "loss_not_decreasing:num_step=5"])
    assert res.exit_code == 2 and "did you mean 'num_steps'?" in one_line_error(res.stderr, "check")
    # `rule:` instead of `rules:` in a YAML file: named, with the expected key
    cfg = tmp_path / "rules.yaml"
    cfg.write_text("rule:\n  - dead_relu\n  - name: loss_not_decreasing\n    num_steps: 20\n")
    for command, *extra in (("check",), ("watch", "--no-state")):
        res = runner.invoke(cli, [command, str(real_run), "--config", str(cfg), *extra])
        line = one_line_error(res.stderr, command)
        assert res.exit_code == 2 and "unknown key 'rule'" in line and "did you mean 'rules'" in line, line
    # a misspelled parameter and an out-of-range one in a file
    cfg.write_text("rules:\n  - name: loss_not_decreasing\n    num_stepz: 20\n")
    res = runner.invoke(cli, ["check", str(real_run), "--config", str(cfg)])
    assert res.exit_code == 2 and "did you mean 'num_steps'" in one_line_error(res.stderr, "check")
    cfg.write_text("rules:\n  loss_not_decreasing: {num_steps: -5}\n")
    res = runner.invoke(cli, ["check", str(real_run), "--config", str(cfg)])
    assert res.exit_code == 2 and "out of range" in one_line_error(res.stderr, "check")
    cfg.write_text("rules:\n  - loss_not_decreasing: 20\n")
    res = runner.invoke(cli, ["check", str(real_run), "--config", str(cfg)])
    assert res.exit_code == 2 and "must be a mapping" in one_line_error(res.stderr, "check")
    # the same through mldbg run, before the script starts
    res = mldbg("run", "--rule", "loss_not_decreasing:num_steps=0", "--", sys.executable, "-c", "print(1)")
    assert res.returncode == 2 and "out of range" in one_line_error(res.stderr, "run")
    assert "1" not in res.stdout.split()  # the script never ran


def test_missing_steps_and_collections_are_named_with_the_nearest(real_run):
    runner = CliRunner()
    res = runner.invoke(cli, ["show", str(real_run), "fc1.weight", "--step", "7", "--mode", "train"])
    line = one_line_error(res.stderr, "show")
    assert res.exit_code == 2 and "nearest saved TRAIN steps: 5 (before), 10 (after)" in line
    import mldbg

    trial = mldbg.create_trial(real_run)
    eval_step = next(s for s in trial.steps() if trial.mode(s) == mldbg.Mode.EVAL)
    res = runner.invoke(cli, ["show", str(real_run), "gradient/fc1.weight", "--step", str(eval_step)])
    line = one_line_error(res.stderr, "show")
    assert res.exit_code == 2 and f"step {eval_step} is an EVAL step" in line
    assert "saved in TRAIN steps only" in line and "(before)" in line and "(after)" in line
    res = runner.invoke(cli, ["ls", str(real_run), "--collection", "weight"])
    assert res.exit_code == 2 and "did you mean weights?" in one_line_error(res.stderr, "ls")


def test_every_choice_of_every_command_says_did_you_mean(real_run, tmp_path):
    """Every fixed set of words the command line takes (modes, plot kinds, export formats...)
    refuses a misspelling in the one-line form, exit 2, with the closest word; the rule is
    checked over every command's parameters, so a new choice cannot miss it."""
    import click

    from mldbg.cli.choice import Choice

    group = cli
    ctx = click.Context(group)
    seen = 0
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        for param in command.params:
            if not isinstance(param.type, click.Choice):
                continue
            assert isinstance(param.type, Choice), f"mldbg {name} {param.name}: use mldbg.cli.choice.Choice"
            seen += 1
            word = str(param.type.choices[0])
            typo = word[:-2] + word[-1] + word[-2]  # two letters swapped
            args = [str(real_run)]
            if isinstance(param, click.Argument):
                # arguments in their place, the others given right
                args = []
                for p in command.params:
                    if not isinstance(p, click.Argument) or p.nargs == -1:
                        continue
                    if p is param:
                        args.append(typo)
                    elif isinstance(p.type, click.Choice):
                        args.append(str(p.type.choices[0]))
                    else:
                        args.append(str(real_run))
            else:
                args = [str(real_run), *(["fc1.weight"] if name == "show" else [])]
                args += [param.opts[0], typo]
            if name == "export":
                args += ["-o", str(tmp_path / "out.csv")]
            res = CliRunner().invoke(cli, [name, *args])
            line = one_line_error(res.stderr, name)
            assert res.exit_code == 2, (name, args, res.output)
            assert f"{typo!r} is not one of" in line and f"did you mean {word!r}?" in line, line
    assert seen >= 6
    res = mldbg("show", str(real_run), "fc1.weight", "--mode", "trian")  # the real command
    line = one_line_error(res.stderr, "show")
    assert res.returncode == 2 and "did you mean 'train'?" in line and "--mode" in line
    res = mldbg("show", str(real_run), "fc1.weight", "--mode", "xyz")  # nothing close: the choices
    assert res.returncode == 2 and "'xyz' is not one of 'train', 'eval', 'predict'" in res.stderr


PLAIN = """
import sys
import torch
from torch import nn
torch.set_num_threads(1)
torch.manual_seed(0)
lr, steps = float(sys.argv[1]), int(sys.argv[2])
x = torch.randn(64, 8)
y = (x[:, 0] > 0).long()
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
loss_fn = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=lr)
for step in range(steps):
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
print("trained", flush=True)
"""


def test_run_fail_on_finding(tmp_path):
    """`mldbg run` keeps the script's exit code, unless --fail-on-finding and a rule fired."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(PLAIN))
    base = ("--rule", "exploding_tensor", "--save-interval", "1", "--quiet")
    broken = (sys.executable, str(script), "1e12", "15")
    res = mldbg("run", "--out", str(tmp_path / "a"), *base, "--", *broken)
    assert res.returncode == 0 and "exploding_tensor" in res.stdout, res.stderr  # fired, exit 0
    res = mldbg("run", "--out", str(tmp_path / "b"), *base, "--fail-on-finding", "--", *broken)
    assert res.returncode == 1 and "exploding_tensor" in res.stdout, res.stderr
    assert "trained" in res.stdout  # the script ran to its end: only the exit status changed
    healthy = (sys.executable, str(script), "0.1", "15")
    res = mldbg("run", "--out", str(tmp_path / "c"), *base, "--fail-on-finding", "--", *healthy)
    assert res.returncode == 0, res.stderr
