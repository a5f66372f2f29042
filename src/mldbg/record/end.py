"""The END marker a recorder writes: `store.markers.End` and each mode's steps begun.

`mode_steps` counts the steps of each mode the training went through, saved or not (an
evaluation pass outside the save schedule is seen, not saved): `mldbg ls` says "saved of
seen" from it. Readers of `End` ignore the key; a run written before it has none."""

from __future__ import annotations

from dataclasses import dataclass, field

from mldbg.store.markers import End


@dataclass(frozen=True)
class StepsEnd(End):
    mode_steps: dict[str, int] = field(default_factory=dict)  # "train", "eval", "predict": steps begun
