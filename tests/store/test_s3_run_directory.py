"""One run per run directory on S3 (SeaweedFS): a second run into a prefix that holds one is
refused, `overwrite=True` replaces it through the store's list and delete, `resume=True`
continues its steps."""

from __future__ import annotations

import pytest

import mldbg
from mldbg.errors import InvalidConfig
from mldbg.store import layout, open_store
from mldbg.torch import Hook

try:
    from .test_s3_torch import train
except ImportError:
    from test_s3_torch import train


def test_a_bucket_prefix_holds_one_run(s3_url):
    train(s3_url, 3)
    with pytest.raises(InvalidConfig, match=f"{s3_url} already holds a run .*overwrite=True.*resume=True"):
        Hook(s3_url)
    train(s3_url, 2, resume=True)
    trial = mldbg.create_trial(s3_url)
    assert trial.loaded_all_steps and trial.steps() == [0, 1, 2, 3, 4]
    store = open_store(s3_url)
    store.write("notes.txt", [b"mine"])
    train(s3_url, 1, overwrite=True)
    trial = mldbg.create_trial(s3_url)
    assert trial.loaded_all_steps and trial.steps() == [0]
    assert store.list(layout.index_prefix("worker_0")) == [layout.index_key("worker_0", 1)]
    assert store.read("notes.txt") == b"mine"
