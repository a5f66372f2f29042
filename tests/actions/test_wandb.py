"""`mldbg.actions.WandB`: findings (and the losses) reach a W&B run in offline mode, sent by a
real `mldbg watch` process; read back from the offline run's own `.wandb` file."""

import glob
import json
import math
import struct
from pathlib import Path

import pytest
from tests.actions.tracker_helpers import LOSSES, nan_run, watch
from wandb.proto import wandb_internal_pb2

import mldbg
from mldbg.actions import ACTIONS, WandB

BLOCK = 32768  # the .wandb file is a LevelDB-style log: 32 KiB blocks of framed chunks


def records(path):
    """The protobuf Records of a `.wandb` file: a 7-byte header (`:W&B`, magic, version),
    then chunks of (crc32, length, type); type 1 is a whole record, 2-4 its first, middle, last part."""
    data = Path(path).read_bytes()
    assert data[:4] == b":W&B"
    pos, parts = 7, []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # block trailer
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0:  # zero padding
            pos += left
            continue
        parts.append(data[pos + 7 : pos + 7 + length])
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(parts))
            parts = []
            yield record


def offline_run(wandb_dir):
    """(history rows, final summary, run record) of the one offline run under `wandb_dir`."""
    (path,) = glob.glob(str(wandb_dir / "wandb" / "offline-run-*" / "run-*.wandb"))
    history, summary, run = [], {}, None
    for r in records(path):
        kind = r.WhichOneof("record_type")
        if kind == "history":
            history.append(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item}
            )
        elif kind == "summary":
            summary.update(
                {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.summary.update}
            )
        elif kind == "run":
            run = r.run
    return history, summary, run


def test_registered_under_wandb():
    assert ACTIONS["wandb"] is WandB and ACTIONS["wand_b"] is WandB


def test_findings_and_losses_in_the_offline_run(tmp_path):
    run = nan_run(str(tmp_path / "run"))
    wandb_dir = tmp_path / "wb"
    actions = [{"type": "wandb", "project": "mldbg-test", "mode": "offline", "dir": str(wandb_dir),
                "log_statistics": True}]  # fmt: skip
    env = {"WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true"}
    res = watch(run, actions, tmp_path, env)
    assert res.returncode == 1, res.stderr  # the rule fired
    history, summary, wb_run = offline_run(wandb_dir)
    assert wb_run.project == "mldbg-test" and wb_run.display_name == "run"
    # the losses, at their steps
    losses = {row["mldbg/step"]: row["mldbg/loss"] for row in history if "mldbg/loss" in row}
    assert sorted(losses) == list(range(len(LOSSES)))
    for step, expect in enumerate(LOSSES):
        got = losses[step]
        assert (math.isnan(expect) and (got == "NaN" or math.isnan(got))) or got == pytest.approx(expect)
    # the finding: its own row, the table, the summary
    (row,) = [r for r in history if "mldbg/findings" in r]
    (finding,) = mldbg.check(run, rules=["exploding_tensor"])[:1]
    assert row["mldbg/step"] == finding.step == 3
    assert row["mldbg/rule/exploding_tensor"] == f"step 3 (TRAIN): {finding.message}"
    assert row["mldbg/findings_table/nrows"] == 1 and row["mldbg/findings_table/_type"] == "table-file"
    table_file = next(wandb_dir.glob("wandb/offline-run-*/files/" + row["mldbg/findings_table/path"]))
    table = json.loads(table_file.read_text())
    assert table["columns"][:2] == ["rule", "step"]
    assert table["data"][0][:4] == ["exploding_tensor", 3, "TRAIN", "error"]
    assert table["data"][0][4] == finding.message
    assert summary["mldbg/findings"] == 1
    assert summary["mldbg/rule/exploding_tensor"] == f"step 3 (TRAIN): {finding.message}"
