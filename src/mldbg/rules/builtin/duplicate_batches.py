"""duplicate_batches: the same samples recur within an epoch, or on several workers at once."""

from __future__ import annotations

import re

import numpy as np

from mldbg.config import Mode
from mldbg.errors import MldbgError
from mldbg.rules.base import Finding, Rule, register
from mldbg.rules.columns import Over, aligned, quiet_prefix
from mldbg.rules.stats import binomial_tail
from mldbg.rules.view import TrialView
from mldbg.store.statistics import vector_name


@register
class DuplicateBatches(Rule):
    """The same samples recur within an epoch, or several data-parallel workers train on the
    same samples at the same step.

    Reads the `sample_fingerprints` of the model's input (`input_name`: one 31-bit hash per
    sample, the two-line PyTorch hook records them at TRAIN statistics steps, and on every
    worker of a data-parallel job at its fingerprint steps). Fires when:
    - *within an epoch*: a batch made mostly (>= `threshold`) of samples already seen is
      followed by a batch mostly of samples never seen: the data did not run out, so the
      samples came back before the epoch ended (a loader whose workers each read the whole
      dataset, a sampler that repeats indices). Full-batch training, multi-epoch training and
      augmented data (nothing ever repeats) are quiet. Two conditions make it a test: the
      mostly-new batch is evidence only while every training step since the first carried
      fingerprints (a batch of a second epoch whose first-epoch twin was at a step without
      statistics looks new: a run recorded at sparse steps would fire or not with the
      machine's load); and the repeats must be too many for chance: a data set that
      yields a new batch after the repeated one holds at least the `d` distinct samples seen
      by then, so a sample drawn at random (with replacement: random windows of a token
      stream, nanoGPT's `get_batch`) repeats one of the `d0` seen by the end of the repeated
      batch (before it, or earlier in it: a batch drawn with replacement repeats itself) with
      chance at most p = d0 / d; the repeats of that batch must be a binomial tail
      P(Bin(n, p) >= repeats) below `budget` / (j (j + 1)) at the j-th such test (alpha
      spending: at most `budget` per run). A batch served twice in a row repeats 32 of 32 at
      p = 1/2 (2e-10); a language model's random windows of a short corpus repeat 4 of 4
      rows at p = 0.35-0.9 (0.01-0.7). A batch that is the previous training step's batch
      again, where one of the two steps stepped no optimizer, is a second pass over the batch of
      one optimizer step (SAM and ASAM ascend on the batch and descend on it again, a gradient
      penalty or R-Drop runs a second forward and backward, Sophia refreshes its Hessian
      estimate on the batch just trained on; the hook starts a step at a forward after a
      backward): not a sample drawn again, so neither a repeat nor evidence. The PyTorch hook
      records `learning_rate/<model>` at each statistics step in which an optimizer stepped;
      where no step of the run has one, a batch served twice is judged as before. Nor is the
      previous step's batch trained on again as the very same tensor, unwritten (the hook's
      `same_input/<model>`): the script takes several steps on one batch (IMLE's inner
      steps, data echoing); a loader serving a batch twice collates a new tensor each time.
      Only the batches that train count: the hook records a model's inputs at its first
      forward with gradients in a TRAIN step, not at forwards under `torch.no_grad()` or
      `torch.inference_mode()` before it (IMLE scores a pool of candidates, a DQN its
      targets), which are recorded only where no forward with gradients follows; a step where
      none did (the hook's `no_grad_input/<model>`) drew no gradient from its batch, which is
      no training batch: neither a repeat nor evidence, and the steps since the first no
      longer all carry one (evolution strategies score many perturbations of the weights on
      one batch, then the update on it, with no backward). With `dataset_size` given, a batch
      mostly of samples already seen before `dataset_size` samples were drawn fires at once
      (the same batch every step);
    - *a fixed batch*: every training step so far (at least `patience` + 1 saved ones) read
      exactly the same samples, and the evaluation has already read more than
      `eval_ratio` times as many distinct samples: `x, y = next(iter(loader))` outside the
      loop. Full-batch training (a GCN, L-BFGS) repeats its batch too, but its batch is the
      training set, which is not smaller than the evaluation's (a GCN evaluates on the same
      nodes); without any evaluation this cannot be told apart (give `dataset_size`);
    - *across workers*: at `patience` steps, more than `threshold` of one worker's samples are
      also in another worker's batch of the same step (a DistributedSampler missing: every
      rank reads the same batches, and the job trains on one worker's worth of data).
    """

    needs = ("inputs",)
    reads = {"inputs": ("sample_fingerprints",)}
    input_name: str = "model_input_0"
    threshold: float = 0.9
    dataset_size: int | None = None
    patience: int = 2
    eval_ratio: float = 2.0
    budget: float = 1e-3

    @property
    def _model(self) -> str:
        """The `<model>` of `same_input/<model>` for `input_name` (`<prefix>model_input_<i>`)."""
        prefix = self.input_name.rsplit("model_input_", 1)[0].rstrip(".")
        return re.escape(prefix or "model")

    @property
    def _no_grad(self) -> str:
        """`no_grad_input/<model>`: the hook's mark of a TRAIN step whose recorded forward ran
        with gradients disabled, no forward with gradients after it."""
        prefix = self.input_name.rsplit("model_input_", 1)[0].rstrip(".")
        return f"no_grad_input/{prefix or 'model'}"

    def reset(self) -> None:
        super().reset()
        self._seen: set[int] = set()
        self._drawn = 0  # samples of the TRAIN steps up to the last one read (estimated from batch sizes)
        # (step, share, repeats, samples, distinct seen by its end) of the first mostly-repeated batch
        self._repeated: tuple[int, float, int, int, int] | None = None
        self._complete = True  # every training step read so far carried fingerprints (mode steps 0, 1, ...)
        self._next = 0  # the mode step the next training fingerprints should have, while complete
        self._tests = 0  # the within-epoch tests made (alpha spending)
        self._shared = 0  # steps in a row with workers sharing samples
        self._fixed: tuple[frozenset[int], int] | None = (
            None  # (the batch, saved TRAIN steps) while every batch was it
        )
        self._fixed_broken = False  # a training batch differed from the first one
        self._eval_seen: set[int] = set()  # distinct samples of the evaluation
        self._last: tuple[int, int, tuple[int, ...]] | None = None  # (step, mode step, batch) read last

    def check(self, trial: TrialView, step: int) -> list[Finding] | None:
        if trial.mode(step) != Mode.TRAIN:
            if trial.mode(step) == Mode.EVAL and not self._fixed_broken:
                rows = trial.statistic(self.input_name, step, "sample_fingerprints")
                if isinstance(rows, np.ndarray):
                    self._eval_seen.update(int(v) for v in rows.reshape(-1))
                fixed = self._fixed_batch(trial, step)
                return None if fixed is None else [fixed]
            return None
        shared = self._across_workers(trial, step)
        within = self._within(trial, step)
        fixed = self._fixed_batch(trial, step)
        return [f for f in (shared, within, fixed) if f is not None]

    def _fixed_batch(self, trial: TrialView, step: int) -> Finding | None:
        """The same training batch at every step while the evaluation reads more samples."""
        if self._fixed is None or self._fixed_broken:
            return None
        batch, count = self._fixed
        if count < self.patience + 1 or len(self._eval_seen) <= self.eval_ratio * len(batch):
            return None
        if not self.first("fixed"):
            return None
        return self.finding(
            trial, step,
            f"every one of the {count} saved training steps so far read the same {len(batch)} samples, while "
            f"the evaluation read {len(self._eval_seen)} distinct samples: the model trains on one batch "
            "(is the batch drawn once, x, y = next(iter(loader)), outside the training loop?)",
            tensors=[self.input_name],
            suggestion="Draw a new batch at every step: for x, y in loader: ... inside the epoch loop. "
            "Full-batch training on purpose evaluates on no more samples than it trains on; pass "
            "dataset_size to judge it.",
        )  # fmt: skip

    def check_columns(self, trial: TrialView, steps: np.ndarray) -> int:
        """The fast path (`mldbg.rules.columns`), for a run of one worker: the leading steps
        where no batch is mostly repeated while that matters (before the first one, or within
        `dataset_size` samples) and, after one, no batch is mostly new; the samples they drew
        are added to the ones seen. A fingerprint to compute from a raw input ends it."""
        if not len(steps) or len(trial.workers()) >= 2:
            return 0
        modes, mode_steps = trial.columns.modes(steps)
        train = modes == int(Mode.TRAIN)
        name = vector_name(self.input_name, "sample_fingerprints")
        vec, inp = Over(trial, name, steps), Over(trial, self.input_name, steps)
        saved = train & vec.raw  # check() reads the saved vector there
        cut = quiet_prefix(train & ~saved & inp.raw)  # to compute from the raw input: check()
        cut = min(cut, quiet_prefix(train & Over(trial, self._no_grad, steps).present))  # check() skips it
        if not self._fixed_broken:  # while every batch was the same, check() reads the evaluation
            cut = min(cut, quiet_prefix((modes == int(Mode.EVAL)) & (vec.raw | inp.raw)))
        rows = np.flatnonzero(saved[:cut])
        if not len(rows):
            return cut
        stacked = trial.columns.values(name)
        if stacked is not None:  # batches of one size
            values = stacked[1][aligned(stacked[0], steps[rows])]
        else:  # batches of several sizes in the run (evaluation batches): maybe not in these steps
            values = trial.columns.values_at(name, steps[rows])
        if values is not None:
            values = values.reshape(len(rows), -1)
            sizes = np.full(len(rows), values.shape[1], dtype=np.int64)
            flat = values.reshape(-1).astype(np.int64)
        else:  # batches of several sizes: one read per step, as check() reads them
            rows = rows[:256]
            cut = min(cut, int(rows[-1]) + 1) if len(rows) == 256 else cut
            found = [
                trial.statistic(self.input_name, int(steps[r]), "sample_fingerprints") for r in rows.tolist()
            ]
            batches = [np.asarray(b).reshape(-1) for b in found if isinstance(b, np.ndarray)]
            if len(batches) != len(rows):
                return 0
            sizes = np.array([len(b) for b in batches], dtype=np.int64)
            flat = np.concatenate(batches).astype(np.int64)
        keep = sizes > 0  # an empty batch: check() skips it
        if not keep.all():
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            flat = np.concatenate(
                [flat[bounds[i] : bounds[i + 1]] for i in np.flatnonzero(keep)] or [flat[:0]]
            )
            rows, sizes = rows[keep], sizes[keep]
        if not len(rows):
            return cut
        # a batch that is the one just before it again (a second pass of one optimizer step, or
        # a batch served twice): check() tells them apart
        again = np.zeros(len(rows), dtype=bool)
        ms, bounds = mode_steps[rows], np.concatenate([[0], np.cumsum(sizes)])
        for i in range(len(rows)):
            prev = self._last[1:] if i == 0 and self._last is not None else None
            if i:
                prev = (int(ms[i - 1]), tuple(flat[bounds[i - 1] : bounds[i]].tolist()))
            if prev is not None and int(ms[i]) == prev[0] + 1 and sizes[i] == len(prev[1]):
                again[i] = prev[1] == tuple(flat[bounds[i] : bounds[i + 1]].tolist())
        if again.any():
            cut = min(cut, int(rows[int(np.argmax(again))]))
        seen = np.fromiter(self._seen, dtype=np.int64, count=len(self._seen))
        # each distinct fingerprint's first position (no stable sort of all of them), and
        # which were seen before, both per distinct value
        distinct, which = np.unique(flat, return_inverse=True)
        which = which.reshape(-1)
        at = np.full(len(distinct), len(flat), dtype=np.int64)
        np.minimum.at(at, which, np.arange(len(flat)))
        first = np.zeros(len(flat), dtype=bool)
        first[at] = True
        repeated = ~first | np.isin(distinct, seen)[which]
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        repeats = np.add.reduceat(repeated.astype(np.int64), bounds[:-1])
        share = repeats / sizes
        before = bounds[:-1]  # samples of the rows before each
        drawn = before + np.maximum(self._drawn, np.maximum.accumulate(mode_steps[rows] * sizes - before))
        mostly = share >= self.threshold
        hit = np.zeros(len(rows), dtype=bool)
        if self._repeated is None:
            hit |= mostly  # the first mostly-repeated batch: check() remembers it
        elif "epoch" not in self._fired:
            hit |= 1 - share >= self.threshold
        if self.dataset_size and "size" not in self._fired:
            hit |= mostly & (drawn < self.dataset_size)
        if hit.any():
            cut = min(cut, int(rows[int(np.argmax(hit))]))
        if not self._fixed_broken:
            cut = self._fixed_columns(flat, bounds, rows, cut)
        take = np.flatnonzero(rows < cut)
        if len(take):
            self._follow(mode_steps[rows[take]])
            last = int(take[-1])
            self._last = (
                int(steps[rows[last]]),
                int(mode_steps[rows[last]]),
                tuple(flat[bounds[last] : bounds[last + 1]].tolist()),
            )
            self._seen.update(distinct[at < bounds[last + 1]].tolist())  # those drawn before the cut
            self._drawn = int(drawn[last] + sizes[last])
        return cut

    def _fixed_columns(self, flat: np.ndarray, bounds: np.ndarray, rows: np.ndarray, cut: int) -> int:
        """The fixed-batch state after the training `rows` before `cut` (their fingerprints
        `flat`, row i at bounds[i]:bounds[i + 1]), as check() keeps it. The evaluation steps
        are check()'s while it holds: the new cut ends the prefix at the step after a
        differing batch at the latest, so check() sees no evaluation before it."""
        ref = self._fixed[0] if self._fixed is not None else None
        count = self._fixed[1] if self._fixed is not None else 0
        for i in range(len(rows)):
            if int(rows[i]) >= cut:
                break
            batch = frozenset(flat[bounds[i] : bounds[i + 1]].tolist())
            if ref is None or batch == ref:
                ref, count = batch, count + 1
                continue
            self._fixed_broken, self._eval_seen = True, set()
            break
        if ref is not None:
            self._fixed = (ref, count)
        return cut

    def _follow(self, mode_steps: np.ndarray) -> None:
        """Whether the training steps with fingerprints, read in order, are still every one."""
        if self._complete and len(mode_steps):
            expected = np.arange(self._next, self._next + len(mode_steps))
            self._complete = bool((mode_steps == expected).all())
            self._next = int(mode_steps[-1]) + 1

    def _second_pass(
        self, trial: TrialView, last: tuple[int, int, tuple[int, ...]], now: tuple[int, int, tuple[int, ...]]
    ) -> bool:
        """`now` (step, mode step, batch) reads the batch of the training step just before it,
        `last`, and did not draw it again: either the PyTorch hook recorded `same_input/<model>`
        at `now` (the model's first input is the very tensor of `last`, not written since: the
        script trains on its batch for several steps, as IMLE's inner steps and data echoing
        do; a loader serving a batch twice hands over a new tensor each time), or no optimizer
        stepped in one of the two while one stepped in the other: a second pass over the batch
        of one optimizer step, before it (SAM, a gradient penalty, R-Drop) or after it
        (Sophia's Hessian refresh on the batch just trained on). The latter is known where the
        hook recorded `learning_rate/<model>` at one of the two (a statistics step whose
        optimizer stepped); where at neither, unknown, and judged as a batch drawn again."""
        if now[1] != last[1] + 1 or now[2] != last[2]:
            return False
        if trial.names(None, regex=f"^same_input/{self._model}$", step=now[0]):
            return True  # the very tensor of the step before, unwritten: trained on again, not drawn again
        stepped_now = bool(trial.names(None, regex="^learning_rate/", step=now[0]))
        stepped_last = bool(trial.names(None, regex="^learning_rate/", step=last[0]))
        # one of the two stepped an optimizer and the other did not (the hook records steps
        # where either did: where neither did, it is unknown, judged as a batch drawn again)
        return stepped_now != stepped_last

    def _chance(self, repeats: int, n: int, before: int, distinct: int) -> float:
        """P(Bin(n, before / distinct) >= repeats): the chance that random draws from a data
        set of at least `distinct` samples repeat `repeats` of `n` from `before` seen."""
        p = min(1.0, before / max(1, distinct))
        return 1.0 if p >= 1.0 else binomial_tail(repeats, n, p, upper=True)

    def _within(self, trial: TrialView, step: int) -> Finding | None:
        rows = trial.statistic(self.input_name, step, "sample_fingerprints")
        if rows is None or isinstance(rows, float) or not len(rows):
            return None
        if trial.names(None, regex=f"^{re.escape(self._no_grad)}$", step=step):
            return None  # no gradient from this batch: not a training batch (and the steps not complete)
        batch = [int(v) for v in np.asarray(rows).reshape(-1)]
        n = len(batch)
        self._follow(np.array([trial.mode_step(step)]))
        if not self._fixed_broken:
            now = frozenset(batch)
            if self._fixed is None or self._fixed[0] == now:
                self._fixed = (now, 1 + (0 if self._fixed is None else self._fixed[1]))
            else:
                self._fixed_broken, self._eval_seen = True, set()
        last, self._last = self._last, (step, trial.mode_step(step), tuple(batch))
        if last is not None and self._second_pass(trial, last, self._last):
            return None
        drawn = max(self._drawn, trial.mode_step(step) * n)  # samples drawn before this batch
        self._drawn = drawn + n
        repeats = 0
        for v in batch:
            if v in self._seen:
                repeats += 1
            self._seen.add(v)
        share = repeats / n
        if share >= self.threshold and self.dataset_size and drawn < self.dataset_size and self.first("size"):
            return self.finding(
                trial, step,
                f"{repeats} of the {n} samples of step {step} ({share:.0%}) were already seen, after "
                f"{drawn} samples drawn of a dataset of {self.dataset_size}: the epoch has not ended",
                tensors=[self.input_name],
                suggestion=self._suggestion(),
            )  # fmt: skip
        if share >= self.threshold and self._repeated is None:
            # a draw of this batch could repeat the samples seen before it or its own earlier
            # draws: at most those seen after it (a batch drawn with replacement repeats itself)
            self._repeated = (step, share, repeats, n, len(self._seen))
            return None
        if (
            self._repeated is None
            or 1 - share < self.threshold
            or not self._complete
            or "epoch" in self._fired
        ):
            return None
        first, was, k, m, seen = self._repeated
        self._tests += 1
        chance = self._chance(k, m, seen, len(self._seen))
        if chance >= self.budget / (self._tests * (self._tests + 1)) or not self.first("epoch"):
            return None
        return self.finding(
            trial, step,
            f"samples recur within an epoch: {was:.0%} of the batch at step {first} had been seen "
            f"before, yet {1 - share:.0%} of the batch at step {step} are new ({len(self._seen)} "
            f"distinct samples so far; drawn at random from them, {k} of {m} would repeat the {seen} seen "
            f"by then with chance {chance:.2g}): the data had not run out when samples came back",
            tensors=[self.input_name],
            suggestion=self._suggestion(),
        )  # fmt: skip

    def _suggestion(self) -> str:
        return (
            "Check the sampler and the data loader: an IterableDataset read by several DataLoader "
            "workers must shard itself (torch.utils.data.get_worker_info()); a map-style dataset "
            "should be drawn without replacement (shuffle=True), and a distributed job needs a "
            "DistributedSampler (with set_epoch) so each rank reads its own part."
        )

    def _across_workers(self, trial: TrialView, step: int) -> Finding | None:
        if len(trial.workers()) < 2:
            return None
        name = vector_name(self.input_name, "sample_fingerprints")
        try:
            records = trial.trial.records(name, step=step)
        except (MldbgError, KeyError):
            return None
        batches: dict[str, set[int]] = {}
        for rec in records:
            if rec.worker not in batches and rec.has_raw:
                batches[rec.worker] = {int(v) for v in np.asarray(trial.trial.read(rec)).reshape(-1)}
        if len(batches) < 2:
            return None
        workers = sorted(batches)
        worst: tuple[float, str, str] | None = None
        for i, a in enumerate(workers):
            for b in workers[i + 1 :]:
                small = min(len(batches[a]), len(batches[b]))
                share = len(batches[a] & batches[b]) / small if small else 0.0
                if worst is None or share > worst[0]:
                    worst = (share, a, b)
        assert worst is not None
        self._shared = self._shared + 1 if worst[0] > self.threshold else 0
        if self._shared < self.patience or not self.first("workers"):
            return None
        share, a, b = worst
        return self.finding(
            trial, step,
            f"{a} and {b} trained on the same samples: {share:.0%} of the samples of step {step} are in "
            f"both batches, at {self._shared} steps in a row (of {len(workers)} workers)",
            tensors=[self.input_name],
            suggestion="Give each rank its own part of the data: DataLoader(dataset, "
            "sampler=DistributedSampler(dataset), ...) and sampler.set_epoch(epoch) every epoch; without "
            "it every rank reads the same batches and the job trains on one rank's worth of data.",
        )  # fmt: skip
