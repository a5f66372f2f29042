"""Helpers for the watch tests: runs written by a real Recorder (no framework needed), and
small rules over the `losses` collection."""

import threading
import time

import numpy as np

import mldbg
from mldbg.record.recorder import Recorder
from mldbg.rules.base import Rule


class LossAbove(Rule):
    """The loss is above `limit` (a test rule: fires at every such step)."""

    needs = ("losses",)
    limit: float = 10.0

    def check(self, trial, step):
        names = trial.tensor_names(collection="losses", step=step)
        for name in names:
            value = float(trial.tensor(name).value(step))
            if value > self.limit:
                return self.finding(trial, step, f"{name} = {value:g} > {self.limit:g}", tensors=[name])
        return None


def recorder(path, **options):
    options.setdefault("flush_seconds", 0.05)
    options.setdefault("stop_check_seconds", 0)
    return Recorder(path, save_config=mldbg.SaveConfig(save_interval=1), **options)


def write_steps(rec, losses, sleep=0.0, on_step=None, flush=False):
    """One TRAIN step per loss value; returns the step numbers written."""
    steps = []
    for loss in losses:
        rec.start_step(mldbg.Mode.TRAIN)
        rec.save_tensor("loss", np.float32(loss), ("losses",))
        rec.save_tensor("fc.weight", np.full((2, 2), loss, dtype=np.float32), ("weights",))
        step = rec.step
        rec.end_step()
        steps.append(step)
        if flush:
            rec.flush()
        if on_step is not None:
            on_step(step)
        if sleep:
            time.sleep(sleep)
    return steps


def record(path, losses, close=True, **options):
    rec = recorder(path, **options)
    write_steps(rec, losses)
    if close:
        rec.close()
    else:
        rec.flush()
    return rec


def in_thread(fn, *args, **kwargs):
    t = threading.Thread(target=fn, args=args, kwargs=kwargs, daemon=True)
    t.start()
    return t
