"""The gate every action shares: dedup per rule (or per finding), rule filter, rate limit,
retries with back-off, and the state a restarted watcher restores."""

import time

from action_helpers import finding

from mldbg.actions import Action


class Collect(Action):
    """A real (tiny) action: remembers what it delivered; can be told to fail."""

    def __init__(self, fail=0, **gate):
        super().__init__(**gate)
        self.batches = []
        self.fail = fail

    def act(self, findings, context):
        if self.fail:
            self.fail -= 1
            raise ConnectionError("server down")
        self.batches.append([(f.rule, f.step) for f in findings])


def test_one_delivery_per_rule_per_run(context):
    a = Collect()
    assert a([finding(step=3), finding(step=4), finding("loss_not_decreasing", 4)], context) == 2
    assert a.batches == [[("exploding_tensor", 3), ("loss_not_decreasing", 4)]]
    assert a([finding(step=9), finding("loss_not_decreasing", 12)], context) == 0
    assert len(a.batches) == 1


def test_every_distinct_finding_when_asked(context):
    a = Collect(once_per_rule=False)
    a([finding(step=3), finding(step=4)], context)
    a([finding(step=4), finding(step=5)], context)  # step 4 again: the same finding
    assert a.batches == [[("exploding_tensor", 3), ("exploding_tensor", 4)], [("exploding_tensor", 5)]]


def test_rule_filter(context):
    a = Collect(rules=["loss_not_decreasing"])
    a([finding(step=3)], context)
    assert a.batches == []
    a([finding("loss_not_decreasing", 5)], context)
    assert a.batches == [[("loss_not_decreasing", 5)]]


def test_rate_limit_batches_until_the_interval_passed(context):
    a = Collect(once_per_rule=False, min_interval=0.3)
    a([finding(step=1)], context)  # the first goes at once
    a([finding(step=2)], context)
    a([finding(step=3)], context)
    assert a.batches == [[("exploding_tensor", 1)]] and a.pending == 2
    time.sleep(0.35)
    a([], context)  # the next cycle: the batch goes
    assert a.batches[1] == [("exploding_tensor", 2), ("exploding_tensor", 3)]
    a([finding(step=4)], context)
    a([], context, final=True)  # the final pass does not wait
    assert a.batches[2] == [("exploding_tensor", 4)]


def test_failures_are_retried_then_dropped_never_raised(context):
    a = Collect(fail=2)
    assert a([finding()], context) == 0  # failed: kept, back-off
    assert a.pending == 1
    assert a([], context) == 0  # within the back-off: not tried
    assert a([], context, final=True) == 0  # tried, failed again
    assert a([], context, final=True) == 1  # third try succeeds
    assert a.batches == [[("exploding_tensor", 3)]]

    b = Collect(fail=10, retries=2)
    for _ in range(4):
        b([finding()], context, final=True)
    assert b.pending == 0 and b.dropped == 1 and b.batches == []


def test_max_deliveries(context):
    a = Collect(once_per_rule=False, max_deliveries=1)
    a([finding(step=1)], context)
    a([finding(step=2)], context)
    assert len(a.batches) == 1 and a.dropped == 1


def test_state_round_trip_prevents_a_second_alert(context):
    a = Collect()
    a([finding()], context)
    b = Collect()
    b.restore(a.state())
    b([finding(step=10)], context, final=True)
    assert b.batches == []
    b([finding("loss_not_decreasing", 11)], context)
    assert b.batches == [[("loss_not_decreasing", 11)]]
