"""StepTimeline -> step rows: phases from the adapter's marks (deterministic event streams)."""

import math

import pytest

from mldbg.profiler.timeline import (
    BACKWARD_END,
    BACKWARD_START,
    DEBUGGER,
    FORWARD_END,
    FORWARD_START,
    OPTIMIZER_END,
    OPTIMIZER_START,
    STEP_BEGIN,
    STEP_COLUMNS,
    STEP_END,
    NoTimeline,
    StepParser,
    StepTimeline,
)

TRAIN, EVAL = 1, 2


def rows_of(events, offset=0.0):
    p = StepParser(offset)
    rows = p.feed(events) + p.close()
    return [dict(zip(STEP_COLUMNS, r, strict=True)) for r in rows]


def train_step(step, t, data=0.0):
    """Events of one training step starting `data` s after `t`; returns (events, end time)."""
    t += data
    ev = [
        (STEP_BEGIN, t, step, TRAIN), (FORWARD_START, t), (FORWARD_END, t + 0.010),
        (BACKWARD_START, t + 0.012), (BACKWARD_END, t + 0.032),
        (OPTIMIZER_START, t + 0.033), (OPTIMIZER_END, t + 0.038), (STEP_END, t + 0.038),
    ]  # fmt: skip
    return ev, t + 0.038


def test_phases_and_data_wait():
    ev0, end0 = train_step(0, 100.0)
    ev1, end1 = train_step(1, end0, data=0.005)
    rows = rows_of(ev0 + ev1, offset=1000.0)
    assert [r["step"] for r in rows] == [0, 1]
    assert math.isnan(rows[0]["data"])  # nothing before the first step
    assert rows[1]["data"] == pytest.approx(0.005)
    for r in rows:
        assert r["forward"] == pytest.approx(0.010)
        assert r["backward"] == pytest.approx(0.020)
        assert r["optimizer"] == pytest.approx(0.005)
        assert r["end"] - r["start"] == pytest.approx(0.038)
    assert rows[0]["start"] == pytest.approx(1100.0)  # perf_counter -> wall clock


def test_the_debuggers_own_time_is_kept_apart():
    """mldbg's statistics inside the forward (its activation hooks) and before the step's end
    are the debugger's time: a column of their own, not the forward's, not the step's."""
    t = 10.0
    ev = [
        (STEP_BEGIN, t, 0, TRAIN), (FORWARD_START, t), (DEBUGGER, t + 0.004, 0.003),
        (FORWARD_END, t + 0.010), (BACKWARD_START, t + 0.012), (BACKWARD_END, t + 0.032),
        (OPTIMIZER_START, t + 0.033), (OPTIMIZER_END, t + 0.038), (DEBUGGER, t + 0.040, 0.002),
        (STEP_END, t + 0.040),
    ]  # fmt: skip
    (row,) = rows_of(ev)
    assert row["debugger"] == pytest.approx(0.005)
    assert row["forward"] == pytest.approx(0.007)
    assert row["backward"] == pytest.approx(0.020) and row["optimizer"] == pytest.approx(0.005)
    assert row["end"] - row["start"] - row["debugger"] == pytest.approx(0.035)


def test_gradient_accumulation_sums_passes():
    t = 5.0
    ev = [(STEP_BEGIN, t, 0, TRAIN)]
    for k in range(3):  # three forward/backward passes, one optimizer step
        b = t + k * 0.1
        ev += [
            (FORWARD_START, b),
            (FORWARD_END, b + 0.01),
            (BACKWARD_START, b + 0.02),
            (BACKWARD_END, b + 0.05),
        ]
    ev += [(OPTIMIZER_START, t + 0.3), (OPTIMIZER_END, t + 0.31), (STEP_END, t + 0.31)]
    (r,) = rows_of(ev)
    assert (
        r["forward"] == pytest.approx(0.03)
        and r["backward"] == pytest.approx(0.09)
        and r["optimizer"] == pytest.approx(0.01)
    )


def test_eval_steps_end_at_their_last_forward_and_unseen_phases_are_nan():
    ev = [
        (STEP_BEGIN, 1.0, 7, EVAL), (FORWARD_START, 1.0), (FORWARD_END, 1.004),
        (STEP_BEGIN, 1.010, 8, EVAL), (FORWARD_START, 1.010), (FORWARD_END, 1.013),
    ]  # fmt: skip
    rows = rows_of(ev)
    assert [r["step"] for r in rows] == [7, 8] and [r["mode"] for r in rows] == [EVAL, EVAL]
    assert rows[0]["end"] == pytest.approx(1.004) and rows[1]["data"] == pytest.approx(0.006)
    assert all(math.isnan(r["backward"]) and math.isnan(r["optimizer"]) for r in rows)


def test_backward_without_output_hook_starts_at_forward_end():
    ev = [(STEP_BEGIN, 0.0, 0, TRAIN), (FORWARD_START, 0.0), (FORWARD_END, 0.01), (BACKWARD_END, 0.03)]
    (r,) = rows_of(ev)  # no optimizer seen: the step ends at its last event
    assert r["backward"] == pytest.approx(0.02) and r["end"] == pytest.approx(0.03)


def test_no_data_wait_across_a_mode_change():
    ev0, end0 = train_step(0, 0.0)
    ev = ev0 + [(STEP_BEGIN, end0 + 1.0, 1, EVAL), (FORWARD_START, end0 + 1.0), (FORWARD_END, end0 + 1.01)]
    rows = rows_of(ev)
    assert math.isnan(rows[1]["data"])


def test_parser_keeps_an_open_step_across_drains():
    ev0, end0 = train_step(0, 0.0)
    p = StepParser(0.0)
    assert len(p.feed(ev0[:4])) == 0
    assert len(p.feed(ev0[4:])) == 1


def test_timeline_records_on_the_calling_thread_cheaply():
    seen = []
    tl = StepTimeline(on_step=lambda step, mode: seen.append((step, mode)))
    for step in range(3):
        tl.forward_start(step, TRAIN)
        tl.forward_start(step, TRAIN)  # a model called twice in a step: one step
        tl.mark(FORWARD_END)
        tl.step_end()
    assert seen == [(0, TRAIN), (1, TRAIN), (2, TRAIN)]
    events = tl.drain()
    assert sum(e[0] == STEP_BEGIN for e in events) == 3 and tl.drain() == []


def test_without_a_profiler_the_marks_go_nowhere():
    """A hook without `profiler_config` marks a `NoTimeline`: the same calls, nothing kept."""
    tl = NoTimeline()
    assert not tl.active and StepTimeline().active
    for step in range(3):
        tl.forward_start(step, TRAIN)
        tl.step_begin(step, TRAIN)
        tl.mark(FORWARD_END)
        tl.step_end()
    assert vars(tl) == {}
