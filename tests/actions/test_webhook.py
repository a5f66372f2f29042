"""Webhook: JSON POSTs received by a real HTTP server on 127.0.0.1."""

import pytest
from action_helpers import finding
from http_sink import Sink

from mldbg.actions import Webhook
from mldbg.errors import InvalidConfig


def test_json_payload(context):
    with Sink() as sink:
        action = Webhook(sink.url, headers={"Authorization": "Bearer t0ken"})
        assert action([finding(step=3), finding("loss_not_decreasing", 5, "loss flat at 0.69")], context) == 2
        assert action([finding(step=8)], context) == 0  # already reported
    (body,) = sink.bodies
    assert body["source"] == "mldbg" and body["run"] == context.run
    assert [f["rule"] for f in body["findings"]] == ["exploding_tensor", "loss_not_decreasing"]
    first = body["findings"][0]
    assert set(first) == {"rule", "step", "mode", "message", "tensors", "suggestion"}
    assert first["step"] == 3 and first["tensors"] == ["gradient/fc1.weight"]
    assert sink.headers[0]["Authorization"] == "Bearer t0ken"
    assert sink.headers[0]["Content-Type"] == "application/json"


def test_slack_payload(context):
    context.stop_requested = "exploding_tensor at step 3"
    with Sink() as sink:
        Webhook(sink.url, slack=True)([finding()], context)
    (body,) = sink.bodies
    assert set(body) == {"text", "blocks"}
    assert "exploding_tensor" in body["text"] and "asked to stop" in body["text"]
    assert body["blocks"][0]["type"] == "section" and body["blocks"][0]["text"]["type"] == "mrkdwn"
    assert "Lower the learning rate" in body["blocks"][1]["text"]["text"]


def test_a_failing_server_is_retried(context):
    with Sink(fail_first=1) as sink:
        action = Webhook(sink.url)
        assert action([finding()], context) == 0  # 503: kept for a retry
        assert action([], context, final=True) == 1
    assert len(sink.bodies) == 1


def test_only_http_urls():
    with pytest.raises(InvalidConfig, match="http"):
        Webhook("file:///etc/passwd")


def test_the_description_hides_the_token():
    url = "https://hooks.slack.com/services/T000/B000/SECRETTOKEN"
    assert "SECRETTOKEN" not in Webhook(url, slack=True).describe()
