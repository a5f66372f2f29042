"""Bad `out_dir` values and tensor names are refused where the user passes them, as one-line
`InvalidConfig` errors naming the value and what to do: never an OSError, a TypeError, a run
recorded into the current directory or a data file no safetensors reader opens."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import mldbg
import mldbg.torch
from mldbg.errors import InvalidConfig, MldbgError
from mldbg.record.recorder import Recorder


@pytest.mark.parametrize(
    ("out_dir", "said"),
    [
        ("", "empty: it would record into the current directory"),
        ("   ", "empty"),
        (b"/tmp/run", "a bytes, not a folder"),
        (42, "a int, not a folder"),
        ("run\0x", "NUL"),
        ("run-\udc80\ud800", "cannot encode"),
        ("r" * 5000, "longer than the file system allows"),
        ("/tmp/" + "d" * 300 + "/run", "longer than the file system allows"),
    ],
)
def test_bad_out_dir_is_an_invalid_config(out_dir, said, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for make in (lambda: mldbg.torch.Hook(out_dir), lambda: Recorder(out_dir)):
        with pytest.raises(InvalidConfig, match="out_dir") as err:
            make()
        message = str(err.value)
        assert said in message and "\n" not in message and len(message) < 400
    assert os.listdir(tmp_path) == []  # nothing recorded into the current directory


def test_out_dir_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(InvalidConfig, match="is a file, not a folder"):
        mldbg.torch.Hook(f)


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("loss\0", "control character"),
        ("a\nb", "control character"),
        ("loss\ud800", "lone surrogate"),
        ("../../etc/passwd", "reads as a path"),
        ("/abs", "reads as a path"),
        ("a/./b", "reads as a path"),
        ("n" * 2000, "more than 1024"),
        ("", "empty"),
        (b"loss", "pass a str"),
    ],
)
def test_bad_names_are_refused_at_the_hook(name, said, tmp_path):
    model = torch.nn.Linear(2, 1)
    with mldbg.torch.Hook(tmp_path, save_config=mldbg.SaveConfig(save_interval=1)) as hook:
        hook.register_module(model)
        model(torch.ones(1, 2)).sum().backward()
        with pytest.raises(InvalidConfig, match="name") as err:
            hook.save_scalar(name, 1.0)
        assert said in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(MldbgError):
            hook.save_tensor(name, torch.ones(3))
        hook.save_scalar("group/fine.name-1", 2.0)  # ordinary names still go through
    trial = mldbg.create_trial(tmp_path)
    assert "group/fine.name-1" in trial.tensor_names()
    assert not any(("\0" in n or ".." in n) for n in trial.tensor_names())


def test_bad_names_from_an_adapter_are_refused_by_the_plan(tmp_path):
    rec = Recorder(tmp_path, save_config=mldbg.SaveConfig(save_interval=1), include_collections=["all"])
    rec.start_step()
    with pytest.raises(InvalidConfig, match="reads as a path"):
        rec.plan("../x", ())
    rec.save("ok", np.ones(2), rec.plan("ok", ()))
    rec.close()
    assert mldbg.create_trial(tmp_path).tensor_names() == ["ok"]


@pytest.mark.parametrize("where", ["/dev/null", "/dev/null/run", "file/run"])
def test_out_dir_that_is_or_lies_under_a_device_or_a_file_is_refused(tmp_path, where):
    # the audit of issue 16: /dev/null escaped as NotADirectoryError from the store
    (tmp_path / "file").write_text("x")
    out = where if where.startswith("/") else str(tmp_path / where)
    with pytest.raises(InvalidConfig, match="not a folder") as err:
        mldbg.torch.Hook(out)
    assert "\n" not in str(err.value)
