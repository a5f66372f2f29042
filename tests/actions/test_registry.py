"""Actions are registered like rules: the built-ins under their snake_case names
(`@register_action`), other packages' under the `mldbg.actions` entry point group, and a
config, the watcher or the command line names them by `type`."""

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mldbg
from mldbg.actions import (
    ACTIONS,
    Action,
    Email,
    Log,
    Metrics,
    StopTraining,
    Webhook,
    action_class,
    register_action,
    resolve_actions,
)
from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.watch import Watcher

PAGER = '''
import json
from mldbg.actions import Action


class Pager(Action):
    """Append each delivery's rules to `path` (a stand-in for a paging service)."""

    def __init__(self, path, **gate):
        super().__init__(**gate)
        self.path = path

    def act(self, findings, context):
        with open(self.path, "a") as f:
            f.write(json.dumps({"run": context.run, "rules": [x.rule for x in findings]}) + "\\n")


NOT_AN_ACTION = 42
'''


@pytest.fixture
def registry():
    """ACTIONS as it was before the test, whatever the test registered."""
    before = dict(ACTIONS)
    yield ACTIONS
    ACTIONS.clear()
    ACTIONS.update(before)


@pytest.fixture
def package(tmp_path, monkeypatch):
    """An installed package `pager_pkg` (a module and its dist-info on sys.path) that
    declares three `mldbg.actions` entry points: a good one, a non-action, a broken import."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "pager_pkg.py").write_text(PAGER)
    info = site / "pager_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pager-pkg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[mldbg.actions]\n"
        "pager = pager_pkg:Pager\n"
        "not_an_action = pager_pkg:NOT_AN_ACTION\n"
        "broken = pager_pkg_missing:Pager\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def recorded_run(path, losses):
    """A finished run of TRAIN steps with these loss values."""
    rec = Recorder(path, save_config=mldbg.SaveConfig(save_interval=1))
    for loss in losses:
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(loss), ("losses",))
        rec.end_step()
    rec.close()
    return path


def test_the_builtins_are_registered_under_their_snake_case_names():
    assert {k: ACTIONS[k] for k in ("stop_training", "stop", "email", "webhook", "log", "metrics")} == {
        "stop_training": StopTraining,
        "stop": StopTraining,
        "email": Email,
        "webhook": Webhook,
        "log": Log,
        "metrics": Metrics,
    }
    assert action_class("Email") is Email and action_class(" stop ") is StopTraining


def test_an_action_registered_with_the_decorator_is_built_by_name(registry, tmp_path):
    @register_action
    class WriteMarker(Action):
        """Write `path` when a rule fires."""

        def __init__(self, path, **gate):
            super().__init__(**gate)
            self.path = path

        def act(self, findings, context):
            with open(self.path, "w") as f:
                f.write(findings[0].rule)

    assert registry["write_marker"] is WriteMarker
    (action,) = resolve_actions([{"type": "write_marker", "path": str(tmp_path / "m"), "rules": ["x"]}])
    assert isinstance(action, WriteMarker) and action.rules == {"x"}
    with pytest.raises(TypeError, match="not a subclass"):
        register_action(dict)


def test_an_action_from_an_entry_point(package, tmp_path):
    cls = action_class("pager")
    assert cls.__module__ == "pager_pkg" and issubclass(cls, Action)
    actions = resolve_actions(["log", {"type": "pager", "path": str(tmp_path / "p")}, StopTraining()])
    assert [type(a).__name__ for a in actions] == ["Log", "Pager", "StopTraining"]
    with pytest.raises(InvalidConfig, match="not a subclass of mldbg.actions.Action"):
        action_class("not_an_action")
    with pytest.raises(InvalidConfig, match="failed to load"):
        action_class("broken")
    with pytest.raises(InvalidConfig, match=r"action #1: unknown type 'pagr'; choose from .*pager"):
        resolve_actions(["pagr"])
    with pytest.raises(InvalidConfig, match=r"action #1 \(pager\):.*colour"):
        resolve_actions([{"type": "pager", "path": "x", "colour": "red"}])
    with pytest.raises(InvalidConfig, match="expected an Action, a name or an object with a 'type'"):
        resolve_actions([42])


def test_the_watcher_builds_actions_by_name(package, tmp_path):
    run = recorded_run(tmp_path / "run", [1.0, float("nan"), 1.0])
    paged, logged = tmp_path / "paged.jsonl", tmp_path / "log.jsonl"
    watcher = Watcher(
        run,
        ["exploding_tensor"],
        [{"type": "pager", "path": str(paged)}, {"type": "log", "path": str(logged)}, "stop"],
        state=False,
    )
    assert [type(a).__name__ for a in watcher.actions] == ["StopTraining", "Pager", "Log"]
    watcher.run()
    assert [json.loads(line)["rules"] for line in paged.read_text().splitlines()] == [["exploding_tensor"]]
    assert json.loads(logged.read_text().splitlines()[0])["step"] == 1


def test_mldbg_watch_config_names_an_installed_action(package, tmp_path):
    run = recorded_run(tmp_path / "run", [1.0, float("nan"), 1.0])
    paged = tmp_path / "paged.jsonl"
    config = tmp_path / "watch.yaml"
    config.write_text(
        textwrap.dedent(f"""
        rules: [exploding_tensor]
        actions:
          - {{type: pager, path: {json.dumps(str(paged))}}}
        """)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", "watch", str(run), "--config", str(config), "--no-state", "-q"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # a rule fired
    assert "[exploding_tensor] step 1" in done.stdout
    (line,) = paged.read_text().splitlines()
    assert json.loads(line) == {"run": str(run), "rules": ["exploding_tensor"]}
