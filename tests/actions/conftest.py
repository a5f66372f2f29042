import pytest

from mldbg.actions import Context


@pytest.fixture
def context(tmp_path):
    """A watcher's context on a run in tmp_path, 8 steps checked."""
    return Context(
        run=str(tmp_path / "run"), rules=["exploding_tensor", "loss_not_decreasing"], step=7, steps_checked=8
    )
