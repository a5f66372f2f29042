"""Two writers starting on one folder within a few milliseconds (two jobs given one `out_dir`;
every rank of a job without `torch.distributed`, all rank 0): exactly one is accepted (issue 28,
item 2). Before the fix both found the folder free (no meta.json yet) and were accepted, 13 of 13
in the adversarial run: one writer's steps vanished or the two were mixed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import mldbg
from mldbg.record.recorder import Recorder

SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import mldbg
    from mldbg.errors import InvalidConfig
    from mldbg.record.recorder import Recorder

    out, start, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
    from mldbg.store import open_store
    open_store(out)  # the store's modules imported (boto3 for a bucket) before the start
    if start == "go":  # both start at the same moment: when the parent says go, once both are ready
        print("ready", flush=True)
        sys.stdin.readline()
    try:
        rec = Recorder(out, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    except InvalidConfig as e:
        print("refused", e, flush=True)
        sys.exit(3)
    for step in range(20):
        rec.start_step()
        rec.save("x", np.full(4, value, np.float32), rec.plan("x", ()))
        rec.end_step()
        time.sleep(0.05)  # a second of writing: the other is released within it
    rec.close()
    print("accepted", flush=True)
    """
)


# the refusal: the other writer is writing, or (on a machine so loaded that one process was
# released a second after the other) it has already finished; either way one run, whole
REFUSALS = ("being recorded right now by another process", "already holds a run")


def start_together(out: str, timeout: float = 120) -> list[tuple[int, str, str]]:
    """Two writers of `out` (values 1 and 2) released at once, each after it has imported
    mldbg and opened the store (however long that takes on a loaded machine): their exit
    codes, outputs and errors."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, out, "go", str(v)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for v in (1.0, 2.0)
    ]
    pipes = [(p.stdin, p.stdout, p.stderr) for p in procs]
    ready = [stdout.readline() for _, stdout, _ in pipes if stdout]
    for stdin, _, _ in pipes:
        if stdin:
            stdin.write("go\n")
            stdin.close()
    results = []
    for p, said, (_, stdout, stderr) in zip(procs, ready, pipes, strict=True):
        assert stdout and stderr
        results.append((p.wait(timeout=timeout), said + stdout.read(), stderr.read()))
        stdout.close()
        stderr.close()
    return results


def test_two_writers_starting_together_one_is_refused(tmp_path):
    for attempt in range(3):
        out = tmp_path / f"run{attempt}"
        results = start_together(str(out))
        codes = sorted(rc for rc, _, _ in results)
        assert codes == [0, 3], results
        refused = next(out_ for rc, out_, _ in results if rc == 3)
        assert any(why in refused for why in REFUSALS), refused
        trial = mldbg.create_trial(str(out))
        values = {float(trial.tensor("x").value(s)[0]) for s in trial.steps()}
        assert len(values) == 1 and trial.steps() == list(range(20)), (values, trial.steps())


def test_the_lock_is_given_back_at_close_and_by_a_refused_writer(tmp_path):
    first = Recorder(tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1))
    first.close()
    child = [sys.executable, "-c", SCRIPT, str(tmp_path / "run"), "0", "5"]
    done = subprocess.run(child, capture_output=True, text=True, timeout=120)
    # the first recorded nothing: the folder is free once it closed
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(child, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "already holds a run" in done.stdout  # refused, lock given back
    again = Recorder(tmp_path / "run", save_config=mldbg.SaveConfig(save_interval=1), overwrite=True)
    again.close()
