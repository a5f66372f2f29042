"""Named collections of tensors, and which of them save at the current step."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from mldbg.config import CollectionConfig, Mode, ReductionConfig, SaveConfig, compile_patterns
from mldbg.errors import InvalidConfig, did_you_mean

DEFAULT_COLLECTIONS = (
    "weights", "biases", "gradients", "losses", "scalars", "inputs", "outputs", "labels",
    "predictions", "relu_activations", "tanh_activations", "sigmoid_activations",
    "optimizer_variables", "all",
)  # fmt: skip
DEFAULT_INCLUDED = ("losses", "scalars", "weights", "biases", "gradients")
# what a mixture-of-experts router decided: the tokens per expert, one small vector a step (the
# two-line hook's statistics mode records it for the routers it recognises: `router_collapse`)
ROUTER = "router"
CUSTOM = "custom"  # the collection that the hook's own `include_regex` makes


@dataclass
class Collection:
    name: str
    patterns: tuple[re.Pattern[str], ...] = ()
    save_config: SaveConfig | None = None
    reduction_config: ReductionConfig | None = None
    matched: bool = False  # did a regex of this collection match any tensor?


class Collections:
    """The hook's collections: which a tensor belongs to, and which save at this step."""

    def __init__(
        self,
        include_collections: Sequence[str] | None,
        include_regex: Sequence[str] | str | None,
        save_all: bool,
        collection_configs: Iterable[CollectionConfig] | None,
        extra_defaults: Sequence[str] = (),
    ):
        self.all: dict[str, Collection] = {n: Collection(n) for n in (*DEFAULT_COLLECTIONS, *extra_defaults)}
        self.all["all"].patterns = (re.compile(".*"),)
        for cfg in collection_configs or ():
            c = self.all.setdefault(cfg.name, Collection(cfg.name))
            c.patterns = cfg.patterns or c.patterns
            c.save_config = cfg.save_config
            c.reduction_config = cfg.reduction_config
        included = list(DEFAULT_INCLUDED if include_collections is None else include_collections)
        if include_collections is None:
            # a configured collection is meant to be saved
            included += [cfg.name for cfg in collection_configs or () if cfg.name not in included]
        if include_regex:
            rx = (include_regex,) if isinstance(include_regex, str) else tuple(include_regex)
            self.all[CUSTOM] = Collection(CUSTOM, compile_patterns(rx, "include_regex"))
            included.append(CUSTOM)
        if save_all:
            included.append("all")
        unknown = [n for n in included if n not in self.all]
        if unknown:
            raise InvalidConfig(
                f"unknown collection(s) {unknown} in include_collections; known: "
                f"{', '.join(sorted(self.all))}. Define new ones with CollectionConfig(name, include_regex=...)"
                + (did_you_mean(unknown[0], self.all) or ".")
            )
        self.included = tuple(dict.fromkeys(included))
        # the collections are the defaults: an adapter may add what it finds (`include`)
        self.defaults = include_collections is None
        self._regex_collections = [c for c in self.all.values() if c.patterns and c.name != "all"]
        self._membership: dict[tuple[str, tuple[str, ...]], tuple[Collection, ...]] = {}
        self.active: frozenset[str] = frozenset()

    def include(self, name: str, save_config: SaveConfig) -> None:
        """Include collection `name` from now on, with `save_config` unless one was configured."""
        c = self.all.setdefault(name, Collection(name))
        if c.save_config is None:
            c.save_config = save_config
        if name not in self.included:
            self.included = (*self.included, name)

    def may_save(self, natural: str) -> bool:
        """Could any tensor of the natural collection `natural` ever be saved?"""
        return natural in self.included or any(self.all[n].patterns for n in self.included)

    def members(self, name: str, natural: tuple[str, ...]) -> tuple[Collection, ...]:
        """Every collection the tensor belongs to (cached: a name's collections never change)."""
        key = (name, natural)
        found = self._membership.get(key)
        if found is None:
            found_list = [self.all[n] for n in natural if n in self.all]
            for c in self._regex_collections:
                if c not in found_list and any(p.search(name) for p in c.patterns):
                    c.matched = True
                    found_list.append(c)
            found_list.append(self.all["all"])
            found = self._membership[key] = tuple(found_list)
        return found

    def update_active(self, default: SaveConfig, mode: Mode, mode_step: int) -> bool:
        """Decide which included collections save at this step. True if any does."""
        active = frozenset(
            n for n in self.included
            if (self.all[n].save_config or default).should_save(mode, mode_step)
        )  # fmt: skip
        if active != self.active:  # else the same object: the recorder's plans for it still hold
            self.active = active
        return bool(active)

    def warn_unmatched(self) -> None:
        """Once names have been seen: a regex that matched nothing is a mistake, say so."""
        for c in self._regex_collections:
            if c.name in self.included and not c.matched:
                pats = ", ".join(p.pattern for p in c.patterns)
                warnings.warn(
                    f"mldbg: collection {c.name!r}: include_regex [{pats}] matched no tensor "
                    "in the first step; check the names with `mldbg ls` after a short run.",
                    UserWarning,
                    stacklevel=4,
                )
