"""similar_across_runs: this run's tensors differ from another run's at the same step."""

from __future__ import annotations

import numpy as np

from mldbg.errors import InvalidConfig, MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.select import as_list, needed, selected, short_list
from mldbg.rules.view import TrialView
from mldbg.trial import Trial, create_trial

_DEFAULT = ("weights", "biases", "gradients", "losses")


@register
class SimilarAcrossRuns(Rule):
    """A tensor differs (not `allclose` with `rtol`, `atol`) from the same tensor of another
    run (`other_trials`: paths or trials) at the same step.

    Two runs with the same seed and code should match: use it to check that training is
    reproducible, or that a refactoring changed nothing. Each tensor is reported once, at the
    first step where it differs. Not in the default set: it needs the other run.
    """

    default = False
    needs = _DEFAULT
    needs_any = True
    other_trials: list[str] | None = None
    collection_names: list[str] | None = None
    tensor_regex: list[str] | None = None
    rtol: float = 1e-5
    atol: float = 1e-8
    suggestion = (
        "Fix every seed (torch.manual_seed, numpy, random, the data loader's generator), turn on "
        "deterministic algorithms (torch.use_deterministic_algorithms(True)), and compare the "
        "configurations of the two runs."
    )

    def __init__(self, base_trial: Trial | None = None, **params: object):
        others = params.get("other_trials")
        objects = []
        if isinstance(others, Trial):
            objects, params["other_trials"] = [others], None
        elif isinstance(others, (list, tuple)) and any(isinstance(o, Trial) for o in others):
            objects = [o for o in others if isinstance(o, Trial)]
            params["other_trials"] = [str(o) for o in others if not isinstance(o, Trial)] or None
        super().__init__(base_trial, **params)
        self._others: list[Trial] | None = objects or None

    def needed_collections(self) -> tuple[str, ...]:
        return needed(self.collection_names, self.tensor_regex, _DEFAULT)

    def _open_others(self) -> list[Trial]:
        if self._others is None:
            paths = as_list(self.other_trials)
            if not paths:
                raise InvalidConfig("similar_across_runs needs other_trials=PATH (the run to compare with)")
            self._others = [create_trial(p) for p in paths]
        return self._others

    def check(self, trial: TrialView, step: int) -> Finding | None:
        others = self._open_others()
        names = selected(trial, step, self.collection_names, self.tensor_regex, _DEFAULT)
        differ = []
        detail = {}
        for other in others:
            for name in names:
                if not other.has_tensor(name) or not other.tensor(name).has_step(step):
                    continue
                try:
                    a = trial.raw(name, step)
                    b = other.tensor(name).value(step)
                except MldbgError:
                    continue
                if a is None:
                    continue
                same = a.shape == b.shape and bool(
                    np.allclose(a, b, rtol=self.rtol, atol=self.atol, equal_nan=True)
                )
                if not same and self.first(name):
                    differ.append(name)
                    gap = (
                        float(np.max(np.abs(a.astype(np.float64) - b)))
                        if a.shape == b.shape
                        else float("nan")
                    )
                    detail[name] = (other.path, gap)
        if not differ:
            return None
        first = differ[0]
        return self.finding(
            trial, step,
            f"{len(differ)} tensor{'s differ' if len(differ) > 1 else ' differs'} from {detail[first][0]} at step {step} "
            f"({short_list(differ)}; max |difference| {detail[first][1]:.3g} in {first})",
            tensors=differ,
        )  # fmt: skip
