"""Which tensors a rule inspects: its `collection_names` and `tensor_regex` parameters.

As in smdebug, the two add up: the tensors of the named collections plus every tensor whose
name matches one of the regexes. With neither given, a rule uses its own default collections.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from mldbg.config import Mode
from mldbg.rules.view import TrialView


def as_list(value: Sequence[str] | str | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def selected(
    view: TrialView,
    step: int,
    collection_names: Sequence[str] | str | None,
    tensor_regex: Sequence[str] | str | None,
    default_collections: Sequence[str] | None,
    exclude: str | None = None,
) -> list[str]:
    """Tensor names saved at `step` that the rule should look at."""
    colls = as_list(collection_names)
    regex = as_list(tensor_regex)
    if not colls and not regex:
        if default_collections is None:
            return view.names(None, step=step, exclude=exclude)
        return view.names(list(default_collections), step=step, exclude=exclude)
    names: list[str] = []
    if colls:
        names += view.names(colls, step=step, exclude=exclude)
    if regex:
        names += view.names(None, regex=regex, step=step, exclude=exclude)
    return sorted(set(names))


def needed(
    collection_names: Sequence[str] | str | None,
    tensor_regex: Sequence[str] | str | None,
    default: tuple[str, ...],
) -> tuple[str, ...]:
    """The collections a rule needs, given its parameters (a regex alone needs none)."""
    colls = as_list(collection_names)
    if colls:
        return tuple(colls)
    if as_list(tensor_regex):
        return ()
    return default


def short_list(names: Sequence[str], limit: int = 6) -> str:
    names = list(names)
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f" and {len(names) - limit} more"


def gradient_names(view: TrialView) -> dict[str, str]:
    """Parameter name -> the name of its gradient tensor (`fc1.weight` -> `gradient/fc1.weight`
    in PyTorch; any gradient whose name ends with the parameter's name elsewhere)."""
    grads = view.names("gradients")
    params = view.names(["weights", "biases"])
    out: dict[str, str] = {}
    gset = set(grads)
    for p in params:
        g = f"gradient/{p}"
        if g in gset:
            out[p] = g
            continue
        for g in grads:
            if g != p and (g.endswith("/" + p) or g.endswith(p)):
                out[p] = g
                break
    return out


def model_prefixes(view: TrialView) -> list[str]:
    """The name prefixes of the models one hook records (a GAN's generator and discriminator):
    the second and later models' inputs are `<prefix>.model_input_<i>`; the first model has
    none (""). Longest first, so that a name belongs to the longest prefix it starts with."""
    found = {m.group(1) for n in view.names("inputs") if (m := re.match(r"(.+\.)model_input_\d+$", n))}
    return sorted(found, key=len, reverse=True) + [""]


def model_of(name: str, prefixes: Sequence[str]) -> str:
    """The prefix of the model a tensor (a parameter, its gradient, a layer's output) belongs to."""
    bare = name.removeprefix("gradient/")
    return next((p for p in prefixes if bare.startswith(p)), "")


# the losses of a step's backward passes that reach different parameters (a GAN's players):
# `loss` and `loss/backward1`, ... (mldbg.frameworks.torch_loss)
_BACKWARD = re.compile(r"^(.*)/backward\d+$")


def adversarial(view: TrialView, steps: Sequence[int]) -> bool:
    """A GAN on one hook, at these training steps: two or more models trained (each one's
    gradients recorded) on a loss whose targets are made per batch (every recorded batch of
    labels holds one class: "real" for the generator's pass); or, with no labels recorded
    (a hinge or Wasserstein loss, the loss read from backward), two losses that one step's
    backward passes give on different parameters (`loss`, `loss/backward1`: the
    discriminator's pass, then the generator's) and that move against each other over these
    steps (`mldbg.rules.losses.opposed`: when one player gains, the other loses). The
    generator's loss is one side of a game: it is not meant to fall (it rises as the
    discriminator learns). Two such losses that fall together (two models, each trained on
    its own task) are no game."""
    return _labelled_game(view, steps) or _opposed_passes(view, steps)


def _opposed_passes(view: TrialView, steps: Sequence[int]) -> bool:
    """Two losses of one step's backward passes on different parameters, moving against
    each other over `steps`."""
    from mldbg.rules.losses import opposed, value_of  # losses reads the view as this module does

    split = [n for n in view.names("losses") if _BACKWARD.match(n)]
    if not split or len(steps) < 10:
        return False
    names = sorted({m.group(1) for n in split if (m := _BACKWARD.match(n))} | set(split))
    series: dict[str, list[float]] = {n: [] for n in names}
    for step in steps:
        got = {n: value_of(view, n, step) for n in names}
        for n, v in got.items():
            if v is not None and all(w is not None for w in got.values()):
                series[n].append(v)
    return any(
        opposed(series[a], series[b]) for i, a in enumerate(names) for b in names[i + 1 :] if series[a]
    )


def _labelled_game(view: TrialView, steps: Sequence[int]) -> bool:
    prefixes = model_prefixes(view)
    if len(prefixes) < 2:
        return False
    trained: set[str] = set()
    one_class: bool | None = None
    for step in steps:
        trained |= {model_of(g, prefixes) for g in view.names("gradients", step=step)}
        for name in view.names("labels", step=step):
            got = view.class_statistics(name, None, step)
            if got is not None and got.samples >= 2:
                single = int(np.count_nonzero(got.labels)) <= 1
                one_class = single if one_class is None else one_class and single
    return len(trained) >= 2 and bool(one_class)


# `moving_targets`: the least growth of the targets' spread that explains a rising loss, how far
# the loss's share of the targets' variance may rise with it (a TD error's share is not fixed:
# early, the values are near their first targets), and the
# latest saved steps of the targets' statistics read per window (the loss's level is a recent one)
_TARGETS_GROWN = 1.5
_SHARE_ROSE = 2.0
_TARGET_STEPS = 3


def moving_targets(
    view: TrialView, loss: str, before: tuple[int, int], after: tuple[int, int], ratio: float
) -> bool:
    """Whether the training loss `loss`, whose level moved by `ratio` from the steps `before`
    to the steps `after` (each a (first, last) range of global steps), chases targets that
    spread out at least as much: the `std` of its float labels (`<loss>_input_1`, recorded
    with the loss's predictions at statistics steps; the median over the saved steps of each
    range's last 3, the nearest one when none falls in it) grew at least `_TARGETS_GROWN`-fold, and
    `ratio` is at most `_SHARE_ROSE` times that growth squared (the loss's share of the targets'
    variance at most doubled). A regression whose targets the model makes
    itself (a TD target r + gamma max Q(s', a), a critic's bootstrapped return) rises as its
    values grow; relative to the targets' variance (the loss of predicting their mean) it
    does not. Such a loss is not judged by its level; a critic that diverges with its own
    targets is left to the rules on its values (`exploding_tensor`)."""
    base = loss.removesuffix("_output_0")
    labels = f"{base}_input_1"
    if not (ratio > 0 and view.has_tensor(labels)):
        return False
    saved = np.asarray(view.tensor(labels).steps(Mode.TRAIN), dtype=np.int64)
    if not len(saved):
        return False

    def spread(lo: int, hi: int) -> float:
        inside = saved[(saved >= lo) & (saved <= hi)][-_TARGET_STEPS:]
        if not len(inside):
            inside = saved[[int(np.argmin(np.minimum(abs(saved - lo), abs(saved - hi))))]]
        got = [view.statistic(labels, int(s), "std") for s in inside]
        finite = [float(g) for g in got if g is not None and np.isfinite(g)]
        return float(np.median(finite)) if finite else float("nan")

    first, last = spread(*before), spread(*after)
    if not (first > 0 and last >= _TARGETS_GROWN * first):
        return False
    return ratio <= _SHARE_ROSE * (last / first) ** 2


def progress_chases_targets(
    view: TrialView, name: str, steps: Sequence[int], p: Any, rise: bool = False
) -> bool:
    """`moving_targets` for a judgement of `mldbg.rules.losses.progress` (`p`) over the saved
    `steps` of the loss `name`: its last block against its first (`rise`: against its best),
    as `loss_not_decreasing` and `underfitting` read a flat or rising loss."""
    n, m = p.n, p.block
    b, early = (p.best_at, p.best) if rise else (0, p.first)
    if not early > 0:
        return False
    return moving_targets(
        view, name, (steps[b], steps[b + m - 1]), (steps[n - m], steps[n - 1]), p.last / early
    )
