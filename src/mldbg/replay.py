"""Find the samples of a batch a finding named, to replay them.

A spike finding (`loss_spike`, `gradient_norm_spike`) carries `Finding.samples`: one
fingerprint per sample of the model's input at its step (`sample_fingerprints`, which the
two-line hook records at its statistics steps). A fingerprint is a hash of the sample's bits
and their positions (`mldbg.store.statistics.sample_fingerprint`), so the same sample gives
the same number in the data set, in any framework and on any device:

    finding = next(f for f in mldbg.check(run) if f.samples)
    indices = mldbg.find_samples(train_dataset, finding.samples)
    bad = [train_dataset[i] for i in indices]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from mldbg.errors import InvalidConfig
from mldbg.store.statistics import sample_fingerprint as st_sample_fingerprint


def _first(sample: Any) -> Any:
    """The model's input of a data-set item: the first element of a tuple or list (`(x, y)`),
    the item itself otherwise."""
    return sample[0] if isinstance(sample, (tuple, list)) else sample


def sample_fingerprint(x: Any) -> int:
    """The fingerprint the hook records for one sample (a row of the batch): a torch tensor,
    a NumPy array or anything `np.asarray` takes. bfloat16 is hashed by its 16-bit patterns,
    as the hook does."""
    if hasattr(x, "detach"):  # a torch tensor: to the host, bfloat16 by its bits
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":  # torch is loaded: the caller made the tensor
            return st_sample_fingerprint(x.view(sys.modules["torch"].int16).numpy().view(np.uint16))
        x = x.numpy()
    return st_sample_fingerprint(np.asarray(x))


def find_samples(
    dataset: Iterable[Any], fingerprints: Iterable[int], input: Callable[[Any], Any] | None = None
) -> list[int]:
    """The indices (in iteration order) of the items of `dataset` whose input has one of
    `fingerprints`, each index once, in the order of the data set. `input` picks the model's
    input from an item (default: the first element of a tuple or list, else the item).
    Stops as soon as every fingerprint was found (the first item of each)."""
    wanted = {int(f) for f in fingerprints}
    if not wanted:
        raise InvalidConfig(
            "find_samples: no fingerprints given (the finding has none: its step recorded no "
            "sample_fingerprints; record with the two-line hook, or statistics=True)"
        )
    pick = input or _first
    found: list[int] = []
    seen: set[int] = set()
    for i, item in enumerate(dataset):
        f = sample_fingerprint(pick(item))
        if f in wanted:
            found.append(i)
            seen.add(f)
            if seen == wanted:
                break
    return found
