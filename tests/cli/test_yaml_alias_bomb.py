"""A YAML alias bomb in a rules file (issue 28, item 9): a 1 KB file of nested aliases kept
`mldbg check --config` running past 60 s and 1 GB. It is refused at once with one line, exit 2;
a recursive alias too; a config with a few ordinary anchors still loads."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mldbg.config_file import load_file

RUN = Path(__file__).parent.parent / "trial" / "data" / "format2_run"
LEVELS = "abcdefghij"


def _bomb() -> str:
    """Nested aliases inside a rule's parameter, where the file's checks walk the value."""
    levels = ['&a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip(LEVELS, LEVELS[1:], strict=False):
        levels.append(f"&{name} [{','.join([f'*{prev}'] * 9)}]")
    return "rules:\n  - name: all_zero\n    patience: [" + ", ".join(levels) + "]\n"


@pytest.mark.parametrize("command", ["check", "watch"])
@pytest.mark.parametrize("text", [_bomb(), "a: &a [*a]\n"], ids=["bomb", "loop"])
def test_a_yaml_alias_bomb_is_refused_at_once_with_one_line(tmp_path, command, text):
    config = tmp_path / "rules.yaml"
    config.write_text(text)
    assert len(text) < 1200
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "mldbg.cli.main", command, str(RUN), "--config", str(config)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "alias" in lines[0] and str(config) in lines[0], done.stderr
    assert time.monotonic() - started < 30


def test_ordinary_anchors_still_load(tmp_path):
    config = tmp_path / "rules.yaml"
    config.write_text("base: &base {patience: 3}\nrules:\n  - {name: all_zero, <<: *base}\n  - *base\n")
    data = load_file(config)
    assert data["rules"][0] == {"name": "all_zero", "patience": 3} and data["rules"][1] == {"patience": 3}
