"""The calibration corpus of issue 26: small real PyTorch trainings of many kinds, healthy ones
and buggy twins (one injected bug each), recorded with the README's two lines.

Each module of this package trains one kind of model (language models, seq2seq, generative
models, RL, contrastive, graphs, tabular, vision, fine-tuning, mixture of experts, mixed
precision) and lists its pipelines in `PIPELINES`; `pipelines()` collects them from every module,
so adding a kind is adding a module. A pipeline is `train(out_dir) -> losses`: a plain training
script as a PyTorch user writes it, with `Hook(out_dir)` + `register_module` (+ `register_loss`
where the script has a loss module), data generated in-process, fixed seeds, a few hundred
steps on one CPU thread.

`split(name)` assigns every pipeline to `tune` or `heldout` from the SHA-1 of its name alone,
decided before any result is seen: rules are tuned on one half and judged on the other.

A module that sets `SPLIT` to one of `LATER` puts all of its pipelines (and their buggy twins)
in that later held-out set instead: pipelines written after the earlier figures had been looked
at, measured once, never tuned on (`fresh`: benchmarks/corpus/fresh.py; `blind`:
benchmarks/corpus/blind_a.py and blind_b.py; `blind2`: blind_c.py and blind_d.py;
`blind3`: blind_e.py and blind_f.py; `blind4`: blind_g.py and blind_h.py; `blind5`: blind_i.py and blind_j.py; `blind6`: blind_k.py and blind_l.py;
`blind7`: blind_m.py and blind_n.py). The SHA-1 split of
every other pipeline is unchanged.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

SPLITS = ("tune", "heldout")
FRESH = "fresh"  # a module-wide held-out set: `SPLIT = FRESH` in the module
BLIND = "blind"  # the next one, written and measured after `fresh` had been looked at
BLIND2 = "blind2"  # the third, written and measured after `blind` had been looked at
BLIND3 = "blind3"  # the fourth, written and measured after `blind2` had been looked at
BLIND4 = "blind4"  # the fifth, written and measured after `blind3` had been looked at
BLIND5 = "blind5"  # the sixth, written and measured after `blind4` had been looked at
BLIND6 = "blind6"  # the seventh, written and measured after `blind5` had been looked at
BLIND7 = "blind7"  # the eighth, written and measured after `blind6` had been looked at
BLIND8 = "blind8"  # the ninth, written and measured after `blind7` had been looked at
BLIND9 = "blind9"  # the tenth, written and measured after `blind8` had been looked at
BLIND10 = "blind10"  # the eleventh, written and measured after `blind9` had been looked at
BLIND11 = "blind11"  # the twelfth, written and measured after `blind10` had been looked at
BLIND12 = "blind12"  # the thirteenth, written and measured after `blind11` had been looked at
BLIND13 = "blind13"  # the fourteenth, written while `blind12` was measured, measured after its fixes
BLIND14 = "blind14"  # the fifteenth, written after `blind13` had been measured
BLIND15 = "blind15"  # the sixteenth, written after `blind14` had been measured, with its fixes in
BLIND16 = "blind16"  # the seventeenth, written after `blind15` had been measured, with its fixes in
BLIND17 = "blind17"  # the eighteenth, written after `blind16` had been measured
BLIND18 = "blind18"  # the nineteenth, written after `blind17` had been measured
BLIND19 = "blind19"  # the twentieth, written after `blind18` had been measured, with its fixes in
BLIND20 = "blind20"  # the twenty-first, written while `blind19` was measured
BLIND21 = "blind21"  # the twenty-second, written while `blind20` was measured
BLIND22 = "blind22"  # the twenty-third, written after `blind21` had been measured, with its fixes in
BLIND23 = "blind23"  # the twenty-fourth, written after `blind22` had been measured
BLIND24 = "blind24"  # the twenty-fifth, written after `blind23` had been measured, with its fixes in
BLIND25 = "blind25"  # the twenty-sixth, written after `blind24` had been measured, with its fixes in
BLIND26 = "blind26"  # the twenty-seventh, written after `blind25` had been measured, with its fixes in
BLIND27 = "blind27"  # the twenty-eighth, written after `blind26` had been measured, with its fixes in
BLIND28 = "blind28"  # the twenty-ninth: trainers' callbacks, written alongside `blind27`
BLIND29 = "blind29"  # the thirtieth: Kaggle competition idioms, written after `blind28` had been measured
BLIND30 = "blind30"  # the thirty-first: scientific and engineering ML, written while `blind29` was measured
BLIND31 = "blind31"  # the thirty-second: quantitative finance and actuarial ML, written after `blind30` had been measured
BLIND32 = "blind32"  # the thirty-third: energy, industry and the environment, written after `blind31` had been measured
LATER = (
    FRESH,
    BLIND,
    BLIND2,
    BLIND3,
    BLIND4,
    BLIND5,
    BLIND6,
    BLIND7,
    BLIND8,
    BLIND9,
    BLIND10,
    BLIND11,
    BLIND12,
    BLIND13,
    BLIND14,
    BLIND15,
    BLIND16,
    BLIND17,
    BLIND18,
    BLIND19,
    BLIND20,
    BLIND21,
    BLIND22,
    BLIND23,
    BLIND24,
    BLIND25,
    BLIND26,
    BLIND27,
    BLIND28,
    BLIND29,
    BLIND30,
    BLIND31,
    BLIND32,
)
ALL_SPLITS = (*SPLITS, *LATER)

# bug -> (rules any of which is expected to fire, the cause a diagnosis should name)
BUGS: dict[str, tuple[tuple[str, ...], str]] = {
    "lr_x100": (
        ("loss_divergence", "loss_spike", "loss_change_point", "loss_not_decreasing", "underfitting",
         "exploding_tensor", "gradient_norm_spike", "dead_relu", "logit_growth"),
        "learning_rate_too_high",
    ),
    "no_zero_grad": (("gradient_not_reset",), "gradients_accumulate"),
    "shuffled_labels": (
        ("loss_not_decreasing", "underfitting", "overfit", "label_confusion"),
        "labels_misaligned",
    ),
    "inputs_x255": (("not_normalized_data", "check_input_images"), "data_not_normalized"),
    "softmax_before_ce": (
        ("loss_not_decreasing", "underfitting", "vanishing_gradient", "softmax_before_cross_entropy"),
        "softmax_before_cross_entropy",
    ),
    "dead_relu_init": (("dead_relu", "all_zero", "poor_weight_initialization"), "bad_initialization"),
    "deep_sigmoid": (
        ("vanishing_gradient", "sigmoid_saturation", "poor_weight_initialization", "loss_not_decreasing",
         "underfitting"),
        "vanishing_gradients",
    ),
    "frozen_by_mistake": (("unchanged_tensor", "weight_update_ratio", "frozen_parameter_in_optimizer"), "parameters_not_updated"),
    "log_zero_nan": (("exploding_tensor",), "numerical_instability"),
    "train_in_eval_mode": (("train_in_eval_mode",), "train_in_eval_mode"),
}  # fmt: skip


@dataclass(frozen=True)
class Pipeline:
    """One training of the corpus. `bug` is None for a healthy run, else a key of BUGS."""

    name: str
    kind: str
    train: Callable[[str], Any] = field(compare=False)
    bug: str | None = None
    twin: str | None = None  # the healthy pipeline this one breaks
    later: str | None = field(default=None, compare=False)  # a module-wide held-out set (LATER)

    @property
    def healthy(self) -> bool:
        return self.bug is None

    @property
    def expected(self) -> tuple[str, ...]:
        return BUGS[self.bug][0] if self.bug else ()

    @property
    def cause(self) -> str | None:
        return BUGS[self.bug][1] if self.bug else None

    @property
    def split(self) -> str:
        return self.later or split(self.name)


def split(name: str) -> str:
    """`tune` or `heldout`, from the parity of the first byte of SHA-1(name): stable across
    machines and runs, and independent of anything a run produces."""
    return SPLITS[hashlib.sha1(name.encode()).digest()[0] & 1]


def installed(*modules: str) -> bool:
    """Whether every one of `modules` is importable here: a module leaves the pipelines of a
    framework that is not out of its `PIPELINES`."""
    return all(importlib.util.find_spec(m) is not None for m in modules)


def healthy(name: str, kind: str, fn: Callable[..., Any], **kw: Any) -> Pipeline:
    return Pipeline(name, kind, partial(fn, **kw))


def buggy(base: Pipeline, bug: str) -> Pipeline:
    """`base` with one injected bug: the pipeline function takes `bug=`."""
    assert bug in BUGS, bug
    fn = base.train
    assert isinstance(fn, partial)
    return Pipeline(
        f"{base.name}+{bug}",
        base.kind,
        partial(fn.func, *fn.args, **fn.keywords, bug=bug),
        bug,
        base.name,
        base.later,
    )


def pipelines() -> dict[str, Pipeline]:
    """Every pipeline of every module of the package, by name."""
    out: dict[str, Pipeline] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        later = getattr(module, "SPLIT", None)
        assert later in (None, *LATER), f"{info.name}: SPLIT must be one of {LATER}"
        for p in module.PIPELINES:
            if later:
                p = dataclasses.replace(p, later=later)
            assert p.name not in out, f"two pipelines named {p.name}"
            out[p.name] = p
    return out
