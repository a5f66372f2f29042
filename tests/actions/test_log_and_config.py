"""Log (logger or JSON lines) and building actions from a config."""

import json
import logging

import pytest
from action_helpers import finding

from mldbg.actions import Email, Log, Metrics, StopTraining, Webhook, from_config
from mldbg.errors import InvalidConfig


def test_log_to_a_json_lines_file(tmp_path, context):
    path = tmp_path / "findings.jsonl"
    log = Log(path)
    log([finding(step=3), finding(step=4)], context)
    log([finding(step=4)], context)  # the same finding again: not repeated
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [3, 4]
    assert rows[0]["rule"] == "exploding_tensor" and rows[0]["run"] == context.run


def test_log_to_the_logger(caplog, context):
    with caplog.at_level(logging.WARNING, logger="mldbg"):
        Log()([finding()], context)
    assert "[exploding_tensor] step 3" in caplog.text


def test_from_config():
    actions = from_config([
        {"type": "stop", "signal": "SIGTERM", "rules": ["exploding_tensor"]},
        {"type": "email", "to": "ml@example.com", "host": "127.0.0.1", "port": 2525},
        {"type": "webhook", "url": "http://127.0.0.1:9/x", "slack": True},
        {"type": "metrics", "port": 0},
        {"type": "log"},
    ])  # fmt: skip
    assert [type(a) for a in actions] == [StopTraining, Email, Webhook, Metrics, Log]
    assert actions[0].rules == {"exploding_tensor"} and actions[1].port == 2525 and actions[2].slack
    with pytest.raises(InvalidConfig, match="unknown type"):
        from_config([{"type": "pager"}])
    with pytest.raises(InvalidConfig, match="email"):
        from_config([{"type": "email", "to": "ml@example.com", "colour": "red"}])
