"""Export a recorded run to TensorBoard event files: `mldbg export-tensorboard PATH LOGDIR`.

Each mode is a TensorBoard run of its own (`LOGDIR/train`, `LOGDIR/eval`, `LOGDIR/predict`),
so training and evaluation curves overlay in one chart; the x axis is the global step, the
same for every mode. What is written, per saved record:

- scalars: tensors of the `losses` and `scalars` collections and any one-element tensor (a
  loss of several elements as its mean), tagged by name; every saved reduction as
  `name/mean`, `name/abs_mean`, `name/l2`...;
- histograms: every other raw tensor (finite values only), tagged by name.

When several workers saved a tensor, each gets its own tag, `name/worker_1`. Files are
written with the `tensorboard` package's protos and record framing only: neither TensorFlow
nor torch is imported. Exporting again into the same LOGDIR replaces the files an earlier
export wrote there (names ending `.mldbg`); `update()` appends only what was recorded since
the last call, so a running job can be followed.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.errors import InvalidConfig, MldbgError
from mldbg.insight.data import RunLike, open_trial
from mldbg.trial import Record

SUBRUNS = {Mode.TRAIN: "train", Mode.EVAL: "eval", Mode.PREDICT: "predict", Mode.GLOBAL: "global"}
SCALAR_COLLECTIONS = ("losses", "scalars")
SUFFIX = ".mldbg"  # marks the event files an export wrote, so a later export replaces only those


@dataclass
class Counts:
    """What an export wrote: per TensorBoard run (`train`, `eval`...), the number of events."""

    scalars: dict[str, int] = field(default_factory=dict)
    histograms: dict[str, int] = field(default_factory=dict)

    def add(self, other: Counts) -> None:
        for mine, theirs in ((self.scalars, other.scalars), (self.histograms, other.histograms)):
            for k, v in theirs.items():
                mine[k] = mine.get(k, 0) + v

    @property
    def total(self) -> int:
        return sum(self.scalars.values()) + sum(self.histograms.values())


class TensorBoardExport:
    """Writes a run's records into TensorBoard event files, incrementally: each `update()`
    exports what was recorded since the previous one. Close it (or use `with`) to flush."""

    def __init__(self, run: RunLike, logdir: str | os.PathLike[str], histograms: bool = True, bins: int = 30):
        if bins < 1:
            raise InvalidConfig(f"bins must be at least 1, got {bins}")
        self._pb = _protos()
        self.trial = open_trial(run)
        self.logdir = Path(logdir)
        self.histograms = histograms
        self.bins = bins
        self._done: dict[str, int] = {}  # tensor name -> records exported (a prefix of its records)
        self._files: dict[str, Any] = {}
        self._replace_earlier_exports()

    # public ---------------------------------------------------------------------------
    def update(self) -> Counts:
        """Export every record not exported yet; returns what was written."""
        trial = self.trial
        trial.refresh()
        scalar_names = {n for c in SCALAR_COLLECTIONS for n in trial.collections().get(c, ())}
        events: dict[str, list[tuple[int, Any]]] = {}
        counts = Counts()
        for name in trial.tensor_names():
            records, several = self._new_records(name)
            for rec in records:
                values = self._values(name, rec, several, name in scalar_names)
                if values:
                    run = SUBRUNS[rec.mode]
                    for v in values:
                        kind = counts.histograms if v.HasField("histo") else counts.scalars
                        kind[run] = kind.get(run, 0) + 1
                    events.setdefault(run, []).append((rec.step, self._pb.Summary(value=values)))
        now = time.time()
        for run, items in events.items():
            out = self._file(run)
            for step, summary in sorted(items, key=lambda item: item[0]):
                out.write(self._pb.Event(wall_time=now, step=step, summary=summary).SerializeToString())
            out.flush()
        return counts

    def follow(self, poll: float = 2.0, timeout: float | None = None) -> Counts:
        """Export until training ends (or `timeout` seconds pass), `poll` seconds apart."""
        total = Counts()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            ended = self.trial.loaded_all_steps
            total.add(self.update())
            if ended or (deadline is not None and time.monotonic() >= deadline):
                return total
            time.sleep(poll)

    @property
    def runs(self) -> list[Path]:
        """The TensorBoard run folders written so far."""
        return [self.logdir / r for r in sorted(self._files)]

    def close(self) -> None:
        for out in self._files.values():
            out.close()
        self._files = {}

    def __enter__(self) -> TensorBoardExport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # internals --------------------------------------------------------------------------
    def _new_records(self, name: str) -> tuple[Iterator[Record], bool]:
        """The records of `name` not exported yet, and whether several workers saved it.

        Reads the trial's index API: a `Record` tells a saved reduction from one the Tensor
        API would compute from the raw tensor. Records only grow, so a count is a cursor."""
        records = self.trial.records(name)
        start, end = self._done.get(name, 0), len(records)
        self._done[name] = end
        several = len(np.unique(records.worker)) > 1
        return (records[p] for p in range(start, end)), several

    def _values(self, name: str, rec: Record, several: bool, scalar: bool) -> list[Any]:
        """The summary values of one record: its saved reductions, then its raw value as a
        scalar (losses, scalars, one-element tensors) or a histogram."""

        def tag(suffix: str = "") -> str:
            return name + (f"/{suffix}" if suffix else "") + (f"/{rec.worker}" if several else "")

        values = [
            self._pb.Value(tag=tag(("abs_" if is_abs else "") + red), simple_value=v)
            for (red, is_abs), v in rec.reductions.items()
        ]
        if rec.has_raw:
            raw = np.asarray(self.trial.read(rec))
            if scalar or raw.size == 1:
                if raw.size:
                    values.append(
                        self._pb.Value(tag=tag(), simple_value=float(np.mean(raw, dtype=np.float64)))
                    )
            elif self.histograms:
                histo = self._histogram(raw)
                if histo is not None:
                    values.append(self._pb.Value(tag=tag(), histo=histo))
        return values

    def _histogram(self, raw: np.ndarray) -> Any:
        v = np.asarray(raw, dtype=np.float64).ravel()
        v = v[np.isfinite(v)]
        if not v.size:
            return None
        lo, hi = float(v.min()), float(v.max())
        if lo == hi:
            limits, counts = np.array([hi]), np.array([v.size])
        else:
            counts, edges = np.histogram(v, bins=self.bins)
            limits = edges[1:]
        return self._pb.HistogramProto(
            min=lo, max=hi, num=float(v.size), sum=float(v.sum()), sum_squares=float(np.dot(v, v)),
            bucket_limit=limits.tolist(), bucket=counts.astype(np.float64).tolist(),
        )  # fmt: skip

    def _file(self, run: str) -> Any:
        out = self._files.get(run)
        if out is None:
            folder = self.logdir / run
            folder.mkdir(parents=True, exist_ok=True)
            name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}{SUFFIX}"
            out = self._files[run] = self._pb.RecordWriter(open(folder / name, "wb"))  # noqa: SIM115
            out.write(self._pb.Event(wall_time=time.time(), file_version="brain.Event:2").SerializeToString())
        return out

    def _replace_earlier_exports(self) -> None:
        for run in SUBRUNS.values():
            folder = self.logdir / run
            if folder.is_dir():
                for f in folder.glob(f"events.out.tfevents.*{SUFFIX}"):
                    f.unlink()


def export_tensorboard(
    run: RunLike,
    logdir: str | os.PathLike[str],
    histograms: bool = True,
    bins: int = 30,
    follow: bool = False,
    poll: float = 2.0,
) -> Counts:
    """Write the run recorded at `run` as TensorBoard logs under `logdir` (one sub-run per
    mode); with `follow=True`, keep exporting new steps until training ends."""
    with TensorBoardExport(run, logdir, histograms=histograms, bins=bins) as export:
        return export.follow(poll) if follow else export.update()


class _Protos:
    """The tensorboard package's protos and record writer, loaded on first use."""

    def __init__(self) -> None:
        from tensorboard.compat.proto import event_pb2, summary_pb2
        from tensorboard.summary.writer.record_writer import RecordWriter

        self.Event = event_pb2.Event
        self.Summary = summary_pb2.Summary
        self.Value = summary_pb2.Summary.Value
        self.HistogramProto = summary_pb2.HistogramProto
        self.RecordWriter = RecordWriter


def _protos() -> _Protos:
    try:
        return _Protos()
    except ImportError:
        raise MldbgError(
            "exporting to TensorBoard needs the tensorboard package: pip install 'mldbg[tensorboard]'"
        ) from None
