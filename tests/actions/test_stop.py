"""StopTraining: the request reaches a real recorder, which stops at its next step with
everything written; and the optional signal reaches the training process."""

import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from action_helpers import finding

import mldbg
from mldbg.actions import Context, StopTraining
from mldbg.errors import InvalidConfig
from mldbg.record.recorder import Recorder
from mldbg.store import layout, open_store


def test_recorder_stops_at_the_next_step_with_everything_readable(tmp_path):
    run = tmp_path / "run"
    rec = Recorder(run, save_config=mldbg.SaveConfig(save_interval=1), stop_check_seconds=0)
    for step in range(3):
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(1.0 / (step + 1)), ("losses",))
        rec.end_step()
    context = Context(run=str(run), store=open_store(run))
    assert StopTraining()([finding(step=2)], context) == 1
    assert context.stop_requested.startswith("exploding_tensor at step 2")
    request = json.loads(open_store(run).read(layout.STOP_REQUEST))
    assert request["rule"] == "exploding_tensor" and request["step"] == 2
    rec.start_step(mldbg.Mode.TRAIN)
    rec.save_tensor("loss", np.float32(0.2), ("losses",))
    with pytest.raises(mldbg.TrainingStopped, match="exploding_tensor at step 2"):
        rec.end_step()
    trial = mldbg.create_trial(run)
    assert trial.loaded_all_steps
    assert trial.steps() == [0, 1, 2, 3]
    assert trial.tensor("loss").value(3) == pytest.approx(0.2)
    end = json.loads(open_store(run).read(layout.end_key("worker_0")))
    assert end["stopped"] is True


def test_one_stop_per_run_and_none_after_the_end(tmp_path):
    store = open_store(tmp_path)
    stop = StopTraining()
    context = Context(run=str(tmp_path), store=store)
    stop([finding("loss_not_decreasing", 30)], context)
    first = store.read(layout.STOP_REQUEST)
    stop([finding("exploding_tensor", 40)], context, final=True)
    assert store.read(layout.STOP_REQUEST) == first

    other = open_store(tmp_path / "ended")
    StopTraining()([finding()], Context(run=str(tmp_path / "ended"), store=other, ended=True))
    assert not other.exists(layout.STOP_REQUEST)  # found in the final pass: nothing to stop


def test_signal_to_a_pid(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        StopTraining(signal="TERM", pid=proc.pid)(
            [finding()], Context(run=str(tmp_path), store=open_store(tmp_path))
        )
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()


def test_signal_to_the_training_found_in_the_run(tmp_path):
    # a training process that records and then hangs between steps (in a data loader, say)
    script = textwrap.dedent(f"""
        import time
        from mldbg.record.recorder import Recorder
        rec = Recorder({str(tmp_path)!r})
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        StopTraining(signal="SIGTERM")([finding()], Context(run=str(tmp_path), store=open_store(tmp_path)))
        assert proc.wait(timeout=10) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.stdout.close()


def test_unknown_signal():
    with pytest.raises(InvalidConfig, match="unknown signal"):
        StopTraining(signal="SIGNOPE")


# only a process proven to be the run's is signalled (issue 16, item 5) ------------------------
HANGING_TRAINING = textwrap.dedent("""
    import sys, time
    from mldbg.record.recorder import Recorder
    rec = Recorder(sys.argv[1])
    print("ready", flush=True)
    time.sleep(60)
""")


def _hanging_training(run):
    proc = subprocess.Popen(
        [sys.executable, "-c", HANGING_TRAINING, str(run)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _point_meta_at(run, pid, **changes):
    """Edit the run's meta.json to name another process, as anyone who can write the folder could."""
    key = layout.meta_key("worker_0")
    meta = json.loads(open_store(run).read(key))
    meta.update(pid=pid, **changes)
    open_store(run).write(key, [json.dumps(meta).encode()])


@pytest.mark.parametrize(
    "edit",
    [
        pytest.param({}, id="pid-swapped"),  # the training's identity, another pid
        pytest.param({"process": None}, id="no-identity"),  # as a run of an older mldbg
        pytest.param({"process": "linux:0:0"}, id="wrong-identity"),
    ],
)
def test_a_meta_naming_an_unrelated_process_does_not_get_it_signalled(tmp_path, caplog, edit):
    run = tmp_path / "run"
    training = _hanging_training(run)
    victim = subprocess.Popen(["sleep", "60"])  # not in the same clock tick as the training
    try:
        _point_meta_at(run, victim.pid, **edit)
        context = Context(run=str(run), store=open_store(run))
        with caplog.at_level("WARNING", logger="mldbg"):
            assert StopTraining(signal="SIGTERM")([finding()], context) == 1
        assert f"did not signal pid {victim.pid}" in caplog.text
        assert "the stop request still stops the training" in caplog.text
        with pytest.raises(subprocess.TimeoutExpired):
            victim.wait(timeout=0.5)  # still alive: never signalled
        assert open_store(run).exists(layout.STOP_REQUEST)  # the file-based request still went out
    finally:
        for proc in (victim, training):
            proc.kill()
            proc.wait()
        training.stdout.close()


def test_a_meta_copying_another_process_s_identity_does_not_get_it_signalled(tmp_path, caplog):
    # the identity is no secret (anyone can read /proc/<pid>/stat): the process named must also
    # hold the run's meta.json open, as the training does and no other process can be made to
    from mldbg.store import process

    run = tmp_path / "run"
    training = _hanging_training(run)
    victim = subprocess.Popen(["sleep", "60"])
    try:
        for in_place in (True, False):  # the training's own file rewritten in place, then a new file
            forged = {**json.loads(open_store(run).read(layout.meta_key("worker_0"))),
                      "pid": victim.pid, "process": process.identity(victim.pid)}  # fmt: skip
            path = run / layout.meta_key("worker_0")
            if in_place:
                with open(path, "r+b") as f:
                    f.truncate(0)
                    f.write(json.dumps(forged).encode())
            else:
                open_store(run).write(layout.meta_key("worker_0"), [json.dumps(forged).encode()])
            caplog.clear()
            with caplog.at_level("WARNING", logger="mldbg"):
                StopTraining(signal="SIGTERM")([finding()], Context(run=str(run), store=open_store(run)))
            assert "does not hold the run's meta.json open" in caplog.text
            with pytest.raises(subprocess.TimeoutExpired):
                victim.wait(timeout=0.5)
    finally:
        for proc in (victim, training):
            proc.kill()
            proc.wait()
        training.stdout.close()


def test_a_reused_pid_is_not_signalled(tmp_path, caplog):
    # the training died without an END (kill -9); its meta keeps its identity. A live process
    # under that pid with another start time is what a reused pid looks like: prove it refused
    # with the live process's own pid and the dead training's identity
    run = tmp_path / "run"
    training = _hanging_training(run)
    dead_identity = json.loads(open_store(run).read(layout.meta_key("worker_0")))["process"]
    training.kill()
    training.wait()
    training.stdout.close()
    assert dead_identity.startswith(("linux:", "psutil:"))
    newcomer = subprocess.Popen(["sleep", "60"])
    try:
        _point_meta_at(run, newcomer.pid, process=dead_identity)
        with caplog.at_level("WARNING", logger="mldbg"):
            StopTraining(signal="SIGTERM")([finding()], Context(run=str(run), store=open_store(run)))
        assert "its start time is not the training's" in caplog.text
        with pytest.raises(subprocess.TimeoutExpired):
            newcomer.wait(timeout=0.5)
    finally:
        newcomer.kill()
        newcomer.wait()


def test_the_run_s_own_training_is_still_signalled_after_the_proof(tmp_path):
    run = tmp_path / "run"
    training = _hanging_training(run)
    try:
        meta = json.loads(open_store(run).read(layout.meta_key("worker_0")))
        assert meta["pid"] == training.pid and meta["process"]
        StopTraining(signal="SIGTERM")([finding()], Context(run=str(run), store=open_store(run)))
        assert training.wait(timeout=10) == -signal.SIGTERM
    finally:
        training.kill()
        training.stdout.close()
