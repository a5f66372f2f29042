"""The loss rules' series held once (`mldbg.rules.losses.SharedColumn`): the trackers of the
rules of one runner share each loss series' buffers, read them as the typed arrays they
replaced, and a tracker whose series goes another way gets its own copy; the findings of
the loss rules together are those of each rule alone (nothing one appends leaks into
another's series)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from mldbg.config import Mode, SaveConfig
from mldbg.record.recorder import Recorder
from mldbg.rules import BUILTIN
from mldbg.rules.losses import LossTracker, SharedColumn, _Buffer
from mldbg.rules.runner import RuleRunner

LOSS_RULES = ("loss_spike", "loss_change_point", "loss_divergence", "loss_not_decreasing", "underfitting")


def _column(shared: dict, code: str = "d") -> SharedColumn:
    buf = shared.setdefault("buf", _Buffer(np.float64 if code == "d" else np.int64))
    return SharedColumn(buf, code)


def test_a_column_reads_as_the_typed_array_it_replaced():
    col, ref = _column({}), array("d")
    for v in (1.5, -0.0, float("nan"), 2.25, float("inf")):
        col.append(v)
        ref.append(v)
    col.extend(np.array([3.0, 4.0]))
    ref.extend([3.0, 4.0])
    assert len(col) == len(ref) and bool(col)
    assert [repr(x) for x in col] == [repr(x) for x in ref]
    assert repr(col[-1]) == repr(ref[-1]) and type(col[0]) is float
    assert col[1:4].tobytes() == ref[1:4].tobytes() and isinstance(col[1:4], array)
    np.testing.assert_array_equal(np.asarray(col), np.asarray(ref))
    assert not np.asarray(col).flags.writeable  # shared: read, never written to
    del col[2:], ref[2:]
    assert col.tolist() == ref.tolist()
    with pytest.raises(IndexError):
        col[5]


def test_columns_share_what_they_append_alike_and_copy_where_they_differ():
    shared: dict = {}
    a, b = _column(shared), _column(shared)
    a.extend(np.arange(5.0))
    b.append(0.0)
    b.extend(np.array([1.0, 2.0]))  # the same values: read from the shared buffer
    assert a._buf is b._buf and len(b) == 3 and len(a) == 5
    b.append(-0.0 + 3.5)  # another value than the shared one at its place: a copy of its own
    assert b._buf is not a._buf and b.tolist() == [0.0, 1.0, 2.0, 3.5]
    assert a.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # untouched
    c = _column(shared)
    c.append(-0.0)  # not the same bits as 0.0
    assert c._buf is not a._buf and repr(c[0]) == "-0.0"
    d = _column(shared)
    d.extend(np.arange(5.0))
    del d[3:]  # cut back (`give_back`), then the same again: still shared
    d.extend(np.array([3.0, 4.0, 5.0]))
    assert d._buf is a._buf and d.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and len(a) == 5


def test_trackers_of_one_view_share_a_series():
    class View:
        loss_columns: dict = {}

    one, two = LossTracker(), LossTracker()
    one.bind(View())
    two.bind(View())
    s, t = one.series("loss", Mode.TRAIN), two.series("loss", Mode.TRAIN)
    s.steps.append(0)
    s.values.append(1.0)
    t.steps.append(0)
    t.values.append(1.0)
    assert s.values._buf is t.values._buf and s.steps._buf is t.steps._buf
    assert LossTracker().series("loss", Mode.TRAIN).values == array("d")  # unbound: its own


def _record(path, steps: int = 3000, jump_at: int | None = None) -> None:
    rec = Recorder(str(path), save_config=SaveConfig(save_interval=1))
    rng = np.random.default_rng(3)
    t = np.arange(steps)
    loss = (0.3 + 2.0 / (1 + t / 200)) * (1 + 0.05 * rng.standard_normal(steps))
    if jump_at is not None:
        loss[jump_at:] *= np.linspace(2.0, 40.0, steps - jump_at)
    for step in range(steps):
        rec.start_step()
        rec.save_scalar("loss", float(loss[step]), collections=("losses",))
        rec.end_step()
    rec.close()


@pytest.mark.parametrize("jump_at", [None, 1500])
@pytest.mark.parametrize("columns", [True, False])
def test_the_loss_rules_together_find_what_each_finds_alone(tmp_path, jump_at, columns):
    _record(tmp_path / "run", jump_at=jump_at)
    together = RuleRunner(str(tmp_path / "run"), [BUILTIN[n]() for n in LOSS_RULES], columns=columns)
    found = together.run_available() + together.finish()
    assert not together.errors
    alone = []
    for name in LOSS_RULES:
        runner = RuleRunner(str(tmp_path / "run"), [BUILTIN[name]()], columns=columns)
        alone += runner.run_available() + runner.finish()
    key = lambda f: (f.rule, f.step, f.message)  # noqa: E731
    assert sorted(map(key, found)) == sorted(map(key, alone))
    if jump_at is not None:
        assert found  # the loss that runs away: found
    # one buffer per loss series and column for all five rules
    assert set(together.view.loss_columns) == {("loss", Mode.TRAIN, "steps"), ("loss", Mode.TRAIN, "values")}
