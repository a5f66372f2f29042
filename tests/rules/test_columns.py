"""The rules' columnar fast path (`check_columns`, `mldbg.rules.columns`) against the
per-step reference (`RuleRunner(..., columns=False)`): the same findings, in the same order,
the same skipped and undecided rules, on real tiny trainings recorded with the two-line hook
(statistics every step), with raw tensors and with reductions only; offline and live (the
run read segment by segment as it lands). And the columns themselves (`mldbg.trial.columns`)
against the records they are decoded from."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import mldbg
from mldbg.rules import BUILTIN
from mldbg.rules.runner import RuleRunner
from mldbg.trial.columns import Columns
from tests.defects import EXTRA
from tests.tiny import train

REDUCTIONS = mldbg.ReductionConfig(
    reductions=("min", "max", "mean", "variance"), abs_reductions=("mean", "max"), norms=("l2",)
)
EVERY_STEP = {"default_hook": True, "hook_kwargs": {"statistics_budget": 0}}
# (train keyword arguments): injected defects whose rules have a fast path, healthy twins
RUNS = {
    "healthy": {},
    "lr_huge": {"lr": 1e12},
    "zero_init": {"init": "zero"},
    "lr_tiny": {"lr": 1e-10},
    "frozen_optimizer": {"frozen_optimizer": True},
    "imbalanced": {"imbalance": 0.97},
    "deep_sigmoid": {"activation": "sigmoid", "depth": 8},
    "negative_bias": {"init": "negative_bias"},
}


# the newer default rules (issue 14's second round of fast paths) -> a run where it fires: train()
# keyword arguments (statistics every step), or a silent-bug scenario (tests/rules/silent.py);
# a second run of a rule is named "<rule> (<what>)"
FIRING: dict[str, dict | str] = {
    "gradient_norm_spike": {"spike_at": 15, "optimizer": "adam"},
    "loss_spike": {"spike_at": 30, "optimizer": "adam"},
    "logit_growth": {"maximize": True, "optimizer": "adam"},
    "gradient_not_reset": {"missing_zero_grad": True},
    "gradient_not_reset (CNN: sample_change)": {"missing_zero_grad": True, "model": "cnn"},
    "gradient_not_reset (CNN, full batch: sample_change on repeated inputs)": {
        "missing_zero_grad": True,
        "model": "cnn",
        "n_train": 64,
        "batch_size": 64,
    },
    "label_confusion": {
        "model": "cnn",
        "pair_noise": {(7, 1): 0.3, (3, 8): 0.3},
        "n_classes": 10,
        "optimizer": "adam",
        "n_train": 1024,
        "steps": 150,
    },
    "batch_dim_mismatch": "broadcast",
    "duplicate_batches": "duplicated_loader",
    "nondeterministic_eval": "functional_dropout",
    "nondeterministic_eval (an evaluation left in training mode, no set_mode)": "eval_in_train_mode",
    # the third round: the rules of the default set that had no fast path left
    # a rise judged after loss_change_point's first 100 values; a climb must go on climbing as
    # long again as its excursion had lasted before it is confirmed: 300 steps
    "loss_change_point": {"maximize": True, "optimizer": "adam", "steps": 300},
    "train_eval_discrepancy": "bn_momentum_zero",
    "train_in_eval_mode": "eval_left_on",
    "train_in_eval_mode (set_mode: the modules' flags)": "eval_left_on_set_mode",
    "frozen_layer_updated": "freeze_with_momentum",
    # the fourth round: rules whose fast path judges its windows in place (issue 14's throughput)
    "class_imbalance (a class ignored: its windows judged in place)": {"imbalance": 0.9, "steps": 120},
    # a loss that rises through the run (gradient ascent), judged at the rule's checkpoints
    # with the quiet values between them screened in place, with an evaluation every 10 steps
    # (the passes kept in the fast path) and without (a single spike at step 100 is no longer
    # a rise for it: loss_spike's and loss_change_point's)
    "loss_not_decreasing (a rise)": {"maximize": True, "optimizer": "adam", "steps": 200},
    "loss_not_decreasing (a rise, no evaluation)": {
        "maximize": True,
        "optimizer": "adam",
        "steps": 200,
        "eval_every": None,
    },
    "loss_not_decreasing (flat from the start)": {"lr": 1e-10},
    "underfitting (after three quiet windows)": {"stop_updating_at": 60, "lr": 0.01, "steps": 150},
    "underfitting (diverging)": {"maximize": True, "optimizer": "adam", "steps": 120},
    # a loss that leaves its starting level at once and stays there (finite): at once, and after
    # a few values that fall back under the bar (SGD at lr 10 oscillates before it stays up)
    "loss_divergence": {"optimizer": "adam", "lr": 10.0, "steps": 30},
    "loss_divergence (oscillating first)": {"lr": 10.0, "steps": 30},
    # the fifth round: the per-series loss rules keep the evaluation passes in their fast path
    # (loss_spike judges each pass as it closes); label_confusion judges its windows in place
    "loss_spike (no evaluation)": {"spike_at": 30, "optimizer": "adam", "eval_every": None},
    "loss_spike (an evaluation pass spikes, an evaluation every 2 steps)": {
        "spike_at": 40,
        "spike_scale": 1000,
        "eval_every": 2,
        "steps": 60,
    },
    "loss_change_point (no evaluation)": {
        "maximize": True,
        "optimizer": "adam",
        "eval_every": None,
        "steps": 300,
    },
    "loss_divergence (no evaluation)": {"optimizer": "adam", "lr": 10.0, "steps": 30, "eval_every": None},
    # overfit judges its evaluation passes in the fast path as they close
    "overfit (16 training samples, Adam)": {"n_train": 16, "optimizer": "adam", "steps": 300},
    # the sixth round: not_normalized_data adds up its first samples' channel statistics and
    # judges them in the fast path (the step that reports is check()'s)
    "not_normalized_data (inputs x 100, an evaluation every 10 steps)": {"input_scale": 100.0},
    "not_normalized_data (shifted inputs, no evaluation)": {"input_shift": 20.0, "eval_every": None},
}
# rule specs (their parameters changed) -> the silent-bug scenario where they fire
WITH_PARAMETERS = {
    "frozen_layer_updated:tensor_regex=^fc1\\.": "freeze_attribute",
    "frozen_layer_updated:rtol=0.001": "freeze_with_momentum",
    "train_in_eval_mode:patience=1": "eval_left_on_set_mode",
    "train_eval_discrepancy:patience=1": "bn_momentum_zero",
    "loss_change_point:window=10": "healthy",
}


def outcome(path: str | Path, columns: bool) -> tuple:
    runner = RuleRunner(mldbg.create_trial(path), ["default", *EXTRA], columns=columns)
    findings = runner.run_available() + runner.finish()
    return [f.to_dict() for f in findings], runner.skipped, runner.unchecked, runner.errors


@pytest.mark.parametrize("name", list(RUNS))
def test_the_fast_path_finds_what_the_per_step_path_finds(tmp_path, name):
    train(tmp_path / "run", steps=80, **EVERY_STEP, **RUNS[name])
    reference = outcome(tmp_path / "run", columns=False)
    assert outcome(tmp_path / "run", columns=True) == reference
    assert not reference[3]  # no rule failed
    if name != "healthy":
        assert reference[0], f"{name}: the injected defect was not found"


@pytest.mark.parametrize("rule", list(FIRING))
def test_the_newer_default_rules_fire_the_same_on_both_paths(tmp_path, silent_run, rule):
    """Each of them fires on its defect, at the same step with the same message on both paths
    (its fast path hands the step over to `check` with the state `check` would have had)."""
    how = FIRING[rule]
    if isinstance(how, str):
        path = silent_run(how)
    else:
        path = str(tmp_path / "run")
        train(path, **{"steps": 80, **EVERY_STEP, **how})
    reference = outcome(path, columns=False)
    assert outcome(path, columns=True) == reference
    assert rule.split()[0] in {f["rule"] for f in reference[0]}, reference[0]
    assert not reference[3]


@pytest.mark.parametrize("spec", list(WITH_PARAMETERS))
def test_with_their_parameters_changed_the_same_on_both_paths(silent_run, spec):
    path = silent_run(WITH_PARAMETERS[spec])
    found = []
    for columns in (False, True):
        runner = RuleRunner(mldbg.create_trial(path), [spec], columns=columns)
        findings = runner.run_available() + runner.finish()
        found.append(([f.to_dict() for f in findings], runner.skipped, runner.unchecked, runner.errors))
    assert found[1] == found[0]
    assert not found[0][3]
    if not spec.startswith("loss_change_point"):
        assert found[0][0], spec


@pytest.mark.parametrize(("balance", "save"), [(0.0, "logits"), (0.1, "logits"), (0.0, "counts")])
def test_router_collapse_the_same_on_both_paths(tmp_path, balance, save):
    """A tiny mixture of experts whose router collapses (balance 0) or not, its logits or its
    token counts saved every step: the default set and router_collapse with other
    parameters find the same on both paths."""
    from tests.rules.test_router_collapse import train_moe

    train_moe(tmp_path / "run", balance=balance, save=save)
    reference = outcome(tmp_path / "run", columns=False)
    assert outcome(tmp_path / "run", columns=True) == reference
    assert ("router_collapse" in {f["rule"] for f in reference[0]}) == (balance == 0.0)
    for spec in ("router_collapse:patience=1", "router_collapse:max_share=0.5"):
        both = []
        for columns in (False, True):
            runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), [spec], columns=columns)
            both.append([f.to_dict() for f in runner.run_available() + runner.finish()])
        assert both[1] == both[0], spec


def test_rank_divergence_the_same_on_both_paths(ddp_jobs):
    """Real two-process gloo jobs (tests/rules/test_rank_divergence.py; ~15 s: the only
    recordings of several workers): a rank that drifts, ranks reading the same batches, the
    healthy twin, and every worker recording everything."""
    for name, path in ddp_jobs.items():
        reference = outcome(path, columns=False)
        assert outcome(path, columns=True) == reference, name
        assert ("rank_divergence" in {f["rule"] for f in reference[0]}) == name.startswith("diverge"), name


@pytest.mark.parametrize("config", ["raw", "reductions", "budget"])
def test_the_same_on_raw_reductions_and_sparse_statistics(tmp_path, config):
    kwargs = {
        "raw": {"include_collections": ("weights", "biases", "gradients", "losses", "relu_activations")},
        "reductions": {"reduction_config": REDUCTIONS, "include_collections": None},
        "budget": {"default_hook": True},  # statistics on the hook's cost budget
    }[config]
    train(tmp_path / "run", steps=60, lr=1e-10, **kwargs)
    reference = outcome(tmp_path / "run", columns=False)
    assert outcome(tmp_path / "run", columns=True) == reference
    assert reference[0]


class Counted:
    """A rule instance whose per-step `check` calls are counted."""

    def __init__(self, rule):
        self.calls = 0
        check = rule.check

        def counted(view, step):
            self.calls += 1
            return check(view, step)

        rule.check = counted


def test_the_fast_path_skips_the_quiet_steps(tmp_path):
    """Not a test that cannot fail: on a healthy run the rules with a fast path call `check`
    at a small share of the steps (the raw steps, the loss windows that close...)."""
    train(tmp_path / "run", steps=200, eval_every=None, **EVERY_STEP)
    names = ["exploding_tensor", "all_zero", "tensor_variance", "vanishing_gradient", "dead_relu",
             "unchanged_tensor", "weight_update_ratio", "class_imbalance", "loss_not_decreasing",
             "gradient_norm_spike", "loss_spike", "logit_growth", "gradient_not_reset", "label_confusion",
             "batch_dim_mismatch", "duplicate_batches", "nondeterministic_eval", "loss_change_point",
             "train_eval_discrepancy", "train_in_eval_mode", "frozen_layer_updated", "rank_divergence"]  # fmt: skip
    rules = [BUILTIN[n]() for n in names]
    counters = {r.name: Counted(r) for r in rules}
    runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), rules)
    assert runner.run_available() + runner.finish() == []
    calls = {n: c.calls for n, c in counters.items()}
    assert all(c <= 60 for c in calls.values()), calls  # of 200 steps
    assert calls["exploding_tensor"] <= 5 and calls["vanishing_gradient"] <= 5, calls
    quiet = (
        "gradient_norm_spike",
        "loss_spike",
        "gradient_not_reset",
        "batch_dim_mismatch",
        "nondeterministic_eval",
        "loss_change_point",
        "train_eval_discrepancy",
        "train_in_eval_mode",
        "frozen_layer_updated",
        "rank_divergence",
        "label_confusion",  # its windows (every 256 labels) judged in the fast path
    )
    assert all(calls[n] <= 2 for n in quiet), calls  # nothing to judge: no step is check()'s
    # logit_growth: the first labels; duplicate_batches: the first repeated batch
    assert calls["logit_growth"] <= 2 and calls["duplicate_batches"] <= 2, calls


@pytest.mark.parametrize("eval_every", [None, 10])
def test_the_loss_and_label_windows_are_judged_in_place(tmp_path, eval_every):
    """On a healthy run, with an evaluation every 10 steps or none, the loss rules never call
    `check` (their windows and values are screened in the fast path, the evaluation passes
    kept there), nor do label_confusion (its windows judged there), nondeterministic_eval,
    overfit and train_eval_discrepancy (the evaluations judged there), gradient_not_reset
    never; class_imbalance only while it counts its first 500 labels (16 steps of 32, and the
    evaluation steps among them)."""
    train(tmp_path / "run", steps=200, eval_every=eval_every, **EVERY_STEP)
    names = ["loss_not_decreasing", "underfitting", "class_imbalance", "gradient_not_reset", "loss_spike",
             "loss_change_point", "loss_divergence", "label_confusion", "nondeterministic_eval"]  # fmt: skip
    if eval_every:  # the rules that judge evaluations
        names += ["overfit", "train_eval_discrepancy"]
    rules = [BUILTIN[n]() for n in names]
    counters = {r.name: Counted(r) for r in rules}
    runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), rules)
    assert runner.run_available() + runner.finish() == []
    assert not runner.skipped, runner.skipped  # every rule judged: the windows were there
    calls = {n: c.calls for n, c in counters.items()}
    never = ("loss_not_decreasing", "underfitting", "gradient_not_reset", "loss_spike", "loss_change_point",
             "loss_divergence", "label_confusion", "nondeterministic_eval", "overfit", "train_eval_discrepancy")  # fmt: skip
    assert all(calls.get(n, 0) == 0 for n in never), calls
    assert calls["class_imbalance"] <= (20 if eval_every is None else 40), calls


def test_live_the_columns_grow_as_segments_land(tmp_path):
    """A watcher's runner over a run copied segment by segment (as a live run lands) finds
    what the per-step path finds over the whole run, at the same steps."""
    src = tmp_path / "src"
    train(
        src,
        steps=90,
        lr=1e-10,
        **{**EVERY_STEP, "hook_kwargs": {"statistics_budget": 0, "flush_seconds": 0.0}},
    )
    worker = next((src / "workers").iterdir())
    indexes = sorted((worker / "index").iterdir())
    assert len(indexes) >= 3, "the run should have several segments"
    dst = tmp_path / "live"
    (dst / "workers" / worker.name / "index").mkdir(parents=True)
    (dst / "workers" / worker.name / "data").mkdir()
    shutil.copy(worker / "meta.json", dst / "workers" / worker.name / "meta.json")
    runner = RuleRunner(mldbg.create_trial(dst), ["default", *EXTRA])
    found = runner.run_available()
    for index in indexes:
        shutil.copy(worker / "data" / index.name, dst / "workers" / worker.name / "data" / index.name)
        shutil.copy(index, dst / "workers" / worker.name / "index" / index.name)
        runner.trial.refresh()
        found += runner.run_available()
    shutil.copy(worker / "END", dst / "workers" / worker.name / "END")
    found += runner.finish()
    reference = outcome(src, columns=False)
    assert sorted((f.rule, f.step, f.message) for f in found) == sorted(
        (f["rule"], f["step"], f["message"]) for f in reference[0]
    )
    assert runner.skipped == reference[1]


def test_columns_equal_the_records(tmp_path):
    train(tmp_path / "run", steps=25, eval_every=10, **EVERY_STEP)
    trial = mldbg.create_trial(tmp_path / "run")
    columns = Columns(trial)
    checked = 0
    for name in trial.tensor_names():
        cols = columns.tensor(name)
        assert cols is not None
        assert list(cols.steps) == sorted(set(trial.tensor(name).steps()))
        shapes = cols.shapes(trial)
        modes, mode_steps = columns.modes(cols.steps)
        for i, step in enumerate(cols.steps.tolist()):
            rec = trial.record(name, step)
            assert bool(cols.has_raw[i]) == rec.has_raw
            assert shapes[i] == rec.shape
            assert (modes[i], mode_steps[i]) == (int(trial.mode(step)), trial.mode_step(step))
            assert cols.mode[i] == int(rec.mode)
            for key in set(rec.statistics) | set(cols.keys()):
                col = cols.statistic(key)
                assert col is not None
                want = rec.statistics.get(key, float("nan"))
                assert col[i] == want or (np.isnan(col[i]) and np.isnan(want)), (name, step, key)
                checked += 1
        for vname in trial.vector_statistics(name).values():
            got = columns.values(vname)
            if got is None:  # not stackable: only where the shape changes (per-row fingerprints of batches)
                tensor = trial.tensor(vname)
                assert len({tensor.value(s).shape for s in tensor.steps()}) > 1, vname
                continue
            have, values = got
            for step, row in zip(have.tolist(), values, strict=True):
                assert np.array_equal(row, trial.tensor(vname).value(step))
                checked += 1
    assert checked > 1000
    assert columns.tensor("no such tensor") is None


def test_a_damaged_data_file_costs_only_its_own_steps(tmp_path):
    """Stacked reads of small raw values (the loss) fall back to one read per record when a
    data file is truncated: only the steps in it are skipped, as on the per-step path."""
    train(
        tmp_path / "run",
        steps=60,
        lr=1e-10,
        **{**EVERY_STEP, "hook_kwargs": {"statistics_budget": 0, "flush_seconds": 0.0}},
    )
    data = sorted((tmp_path / "run" / "workers" / "worker_0" / "data").iterdir())
    assert len(data) >= 3
    data[1].write_bytes(data[1].read_bytes()[:100])
    runs = []
    for columns in (False, True):
        runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), ["default", *EXTRA], columns=columns)
        findings = runner.run_available() + runner.finish()
        runs.append(([f.to_dict() for f in findings], runner.skipped, runner.errors, sorted(runner.corrupt)))
    assert runs[1] == runs[0]
    assert runs[0][3] and runs[0][0]  # the damage was met, and the defect still found


def test_a_flipped_bit_in_a_stacked_value_is_caught_as_on_the_per_step_path(tmp_path):
    """Stacked reads verify each record's checksum (format 3), as single reads do: a bit flipped
    in a loss value is a damaged record on both paths, never a wrong loss."""
    train(tmp_path / "run", steps=30, lr=1e-10, **EVERY_STEP)
    trial = mldbg.create_trial(tmp_path / "run")
    loss = trial.tensor_names(collection="losses")[0]
    step = trial.tensor(loss).steps()[12]
    value = np.ascontiguousarray(trial.tensor(loss).value(step)).tobytes()
    hits = []
    for path in (tmp_path / "run" / "workers" / "worker_0" / "data").iterdir():
        blob = path.read_bytes()
        if blob.count(value) == 1:
            hits.append((path, blob, blob.index(value)))
    assert hits, "the loss value's bytes were not found once in any data file"
    path, blob, at = hits[0]
    damaged = bytearray(blob)
    damaged[at] ^= 0x01
    path.write_bytes(bytes(damaged))
    runs = []
    for columns in (False, True):
        runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), ["default", *EXTRA], columns=columns)
        findings = runner.run_available() + runner.finish()
        runs.append(([f.to_dict() for f in findings], runner.skipped, runner.errors, sorted(runner.corrupt)))
    assert runs[1] == runs[0]
    assert runs[0][3], "the flipped bit was not noticed"


@pytest.mark.parametrize(
    "params", [{}, {"window": 300, "every": 100, "patience": 3}, {"window": 1000, "every": 64, "min_step": 0}]
)
def test_label_confusion_windows_judged_in_place_end_as_check_leaves_them(tmp_path, params):
    """label_confusion's fast path pushes and judges its windows with cumulative sums: the
    same findings as `check` at every step, and the same windows after the run (matrices,
    label counts, streaks), with other window sizes and judgement intervals too."""
    train(tmp_path / "run", **{**EVERY_STEP, **FIRING["label_confusion"]})  # type: ignore[arg-type]
    found, windows = [], []
    for columns in (False, True):
        rule = BUILTIN["label_confusion"](**params)
        runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), [rule], columns=columns)
        found.append([f.to_dict() for f in runner.run_available() + runner.finish()])
        windows.append(
            {
                mode: (w.matrix.tolist(), list(w.sums), w.total, w.pushed, w.fresh, w.streak)
                for mode, w in rule._windows.items()
            }
        )
    assert found[0] == found[1] and windows[0] == windows[1]
    assert windows[0]  # the windows were filled


def _weights_run(out: str, bad: dict[int, float], stats_at_raw: bool = True) -> None:
    """A weight `fc.weight` (4x4) with its statistics (`nan_count`, `inf_count`, `max_abs`)
    every step and its raw value at steps 0, 10 and 20 (as the two-line hook saves weights
    now and then), 30 steps; `bad` puts a value (NaN, inf) into it at those steps."""
    from mldbg.record.recorder import Recorder

    rec = Recorder(
        out,
        save_config=mldbg.SaveConfig(save_steps=[0, 10, 20]),
        include_collections=["weights"],
    )
    for step in range(30):
        rec.start_step(mldbg.Mode.TRAIN)
        value = np.full((4, 4), 0.5 + step, dtype=np.float32)
        if step in bad:
            value[1, 2] = bad[step]
        if step % 10 == 0:
            rec.save("fc.weight", value, rec.plan("fc.weight", ("weights",)))
        if step % 10 or stats_at_raw:
            stats = {
                "nan_count": float(np.isnan(value).sum()),
                "inf_count": float(np.isinf(value).sum()),
                "max_abs": float(np.max(np.abs(value))),
            }
            rec.save_statistics(
                lambda s=stats: {"fc.weight": s}, {"fc.weight": ("F32", (4, 4), ("weights",))}, 64
            )
        rec.end_step()
    rec.close()


@pytest.mark.parametrize(
    ("bad", "stats_at_raw", "fires"),
    [
        ({}, True, None),
        ({20: float("nan")}, True, 20),  # its max_abs saved NaN: the record says which (check)
        ({10: float("inf")}, True, 10),
        ({20: float("nan")}, False, 20),  # no statistics at the raw step: from the raw value
        ({10: float("-inf")}, False, 10),
    ],
)
def test_exploding_tensor_judges_the_raw_steps_in_its_fast_path(tmp_path, bad, stats_at_raw, fires):
    """The steps where a weight was saved raw are judged in the fast path from the raw values
    (read together) as `check` judges them, so a healthy run calls `check` at none of them;
    a NaN or inf there fires at the same step with the same message on both paths."""
    _weights_run(str(tmp_path / "run"), bad, stats_at_raw)
    found, calls = [], []
    for columns in (False, True):
        rule = BUILTIN["exploding_tensor"]()
        counter = Counted(rule)
        runner = RuleRunner(mldbg.create_trial(tmp_path / "run"), [rule], columns=columns)
        found.append([f.to_dict() for f in runner.run_available() + runner.finish()])
        calls.append(counter.calls)
    assert found[1] == found[0]
    assert [f["step"] for f in found[0]] == ([] if fires is None else [fires])
    assert calls[0] == 30
    assert calls[1] == (0 if fires is None else 1), calls


@pytest.mark.parametrize("eval_every", [None, 10])
@pytest.mark.parametrize("samples", [100, 500, 5000])
def test_not_normalized_data_judges_its_first_samples_in_its_fast_path(tmp_path, eval_every, samples):
    """not_normalized_data adds up the channel statistics of its first `threshold_samples`
    samples in its fast path and judges them there: on scaled inputs it fires at the same step
    with the same message on both paths (`check` called only there), on healthy ones neither
    path reports and the fast path never calls `check`; with more samples than the run has,
    both leave the same moments to `finish`."""
    found, calls = [], []
    for scale in (1.0, 100.0):
        path = tmp_path / f"run{scale}"
        train(path, steps=60, input_scale=scale, eval_every=eval_every, **EVERY_STEP)
        for columns in (False, True):
            rule = BUILTIN["not_normalized_data"](threshold_samples=samples)
            counter = Counted(rule)
            runner = RuleRunner(mldbg.create_trial(path), [rule], columns=columns)
            got = [f.to_dict() for f in runner.run_available() + runner.finish()]
            found.append((scale, columns, got, runner.skipped, runner.unchecked))
            calls.append((scale, columns, counter.calls))
    assert found[1][2:] == found[0][2:] and found[3][2:] == found[2][2:]
    assert not found[0][2]  # healthy inputs: quiet
    assert [f["rule"] for f in found[2][2]] == ["not_normalized_data"]  # x 100: reported
    fast = dict(((scale, c), n) for scale, c, n in calls)
    assert fast[(1.0, True)] == 0, calls
    assert fast[(100.0, True)] == (0 if samples == 5000 else 1), calls  # at 5000: finish() judges
