"""Small steps (a loss, statistics) do not wake a writer that waits for its open segment's
deadline; they join that segment. They are still written by their deadline, in one segment
per flush period, and a large step still wakes the writer at once."""

import time

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder


def _materialized(rec: Recorder) -> int:
    """Records the writer has taken from the queue so far (open segment and written ones)."""
    return len(rec.writer._open) + rec.writer.written_records


def test_small_steps_join_the_open_segment_and_are_written_by_its_deadline(tmp_path):
    flush = 0.4
    rec = Recorder(
        str(tmp_path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=flush,
    )
    submitted: list[float] = []
    late: list[float] = []
    steps = 60
    for step in range(steps):
        rec.start_step()
        rec.save("loss", np.float32(step), rec.plan("loss", ()))
        rec.end_step()
        submitted.append(time.monotonic())
        time.sleep(0.02)
        # each record written by its deadline (with room for a loaded machine)
        done = rec.writer.written_records
        late += [time.monotonic() - t for t in submitted[done:] if time.monotonic() - t > flush + 0.5]
    rec.close()
    assert not late, f"records older than flush_seconds + 0.5 s not written: {late[:3]}"
    assert mldbg.create_trial(str(tmp_path)).tensor("loss").steps() == list(range(steps))
    # ~1.2 s of steps at 0.4 s a segment: a few segments, not one per step
    assert rec.writer.written_segments <= 8


def test_a_large_step_wakes_the_writer_at_once(tmp_path):
    rec = Recorder(
        str(tmp_path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=5.0,
    )
    rec.start_step()
    rec.save("loss", np.float32(1), rec.plan("loss", ()))
    rec.end_step()
    deadline = time.monotonic() + 5
    while _materialized(rec) < 1 and time.monotonic() < deadline:  # the first step wakes it
        time.sleep(0.01)
    assert _materialized(rec) == 1
    rec.start_step()
    rec.save("small", np.float32(2), rec.plan("small", ()))
    rec.end_step()
    time.sleep(0.3)
    assert _materialized(rec) == 1  # waits for the segment's deadline, 5 s away
    big = np.ones(2 << 20, dtype=np.float32)  # 8 MiB: not a small step
    rec.start_step()
    rec.save("big", big, rec.plan("big", ()))
    rec.end_step()
    deadline = time.monotonic() + 3
    while _materialized(rec) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _materialized(rec) == 3  # woken: the small one and the large one are taken
    rec.close()
    trial = mldbg.create_trial(str(tmp_path))
    assert trial.tensor("big").steps() == [2]


def test_the_writer_wakes_once_per_segment(tmp_path):
    """After a segment is written, the writer waits for the next one's deadline counted from
    then (no later than its records' own), so the first small step after it does not wake it
    either: one wake per segment while steps keep coming, and records still in time."""
    flush = 0.3
    rec = Recorder(
        str(tmp_path),
        save_config=mldbg.SaveConfig(save_interval=1),
        include_collections=["all"],
        flush_seconds=flush,
    )
    writer = rec.writer
    wakes = [0]
    wait = writer._cond.wait

    def counted(timeout=None):
        try:
            return wait(timeout)
        finally:
            wakes[0] += 1

    submitted: list[float] = []
    late: list[float] = []
    for step in range(90):
        if step == 10:  # the first segments are behind it: count from here
            writer._cond.wait = counted
            segments0 = writer.written_segments
        rec.start_step()
        rec.save("loss", np.float32(step), rec.plan("loss", ()))
        rec.end_step()
        submitted.append(time.monotonic())
        time.sleep(0.02)
        done = rec.writer.written_records
        late += [time.monotonic() - t for t in submitted[done:] if time.monotonic() - t > flush + 0.5]
    segments = writer.written_segments - segments0
    rec.close()
    assert not late, f"records older than flush_seconds + 0.5 s not written: {late[:3]}"
    assert mldbg.create_trial(str(tmp_path)).tensor("loss").steps() == list(range(90))
    assert segments >= 3
    assert wakes[0] <= segments + 2, f"{wakes[0]} wakes for {segments} segments"
