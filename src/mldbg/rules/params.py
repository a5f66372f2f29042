"""A rule's parameters at the boundary: converted from text (command line, YAML), checked for
type and range, and refused with the allowed range in the message.

Ranges are declared, not coded: a parameter's range comes from the rule class's `bounds`
(`{"threshold": Range(0, 100)}`, merged along its bases), else from `BY_RULE` (the built-in
rules whose parameter means something else than its name usually does), else from `BY_NAME`,
keyed by parameter name (`num_steps`: a count, >= 1), else a name ending in `_percent` is
0..100. A parameter with no
range anywhere is only checked for type.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any

from mldbg.config import Mode
from mldbg.errors import InvalidConfig


@dataclass(frozen=True)
class Range:
    """Closed bounds of a numeric parameter; None: unbounded on that side."""

    lo: float | None = None
    hi: float | None = None

    def __contains__(self, value: float) -> bool:
        return (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)

    def __str__(self) -> str:
        if self.lo is not None and self.hi is not None:
            return f"between {self.lo:g} and {self.hi:g}"
        if self.lo is not None:
            return f">= {self.lo:g}"
        return f"<= {self.hi:g}" if self.hi is not None else "any number"


COUNT = Range(1)  # how many steps, samples, windows, features
NON_NEGATIVE = Range(0)  # thresholds, tolerances, ratios, steps to skip
PERCENT = Range(0, 100)
FRACTION = Range(0, 1)

#: parameter name -> its range, wherever a rule uses the name in its usual meaning
BY_NAME: dict[str, Range] = {
    **dict.fromkeys(
        (
            "num_steps",
            "window",
            "samples",
            "threshold_samples",
            "steps",
            "nfeatures",
            "depth",
            "patience",
            "patience_train",
            "patience_validation",
            "category_no",
        ),
        COUNT,
    ),  # fmt: skip
    **dict.fromkeys(
        (
            "threshold_inactivity",
            "threshold_layer",
            "gpu_threshold",
            "cpu_threshold",
            "io_threshold",
            "threshold_p95",
            "threshold_p5",
            "cpu_threshold_p95",
            "gpu_threshold_p95",
            "gpu_memory_threshold_p95",
            "data_threshold",
            "diff_percent",
            "token_thresholds_percent",
        ),
        PERCENT,
    ),  # fmt: skip
    **dict.fromkeys(("min_diag", "max_off_diag", "threshold_misprediction"), FRACTION),
    **dict.fromkeys(
        (
            "threshold",
            "rtol",
            "atol",
            "epsilon",
            "delta",
            "ratio_threshold",
            "gap_threshold",
            "large_threshold",
            "small_threshold",
            "min_threshold",
            "max_threshold",
            "threshold_mean",
            "threshold_std",
            "distribution_range",
            "increase",
            "min_splits",
            "min_splits_per_feature",
            "n_outliers",
            "start_step",
            "channel",
            "stddev",
            "min_ratio",
            "increase_threshold_percent",
        ),
        NON_NEGATIVE,
    ),  # fmt: skip
    "threshold_imbalance": Range(1),
}

#: (rule, parameter) -> range, where a built-in rule gives a common name its own meaning
BY_RULE: dict[tuple[str, str], Range] = {
    ("all_zero", "threshold"): PERCENT,  # percent of the elements that are zero
    ("cpu_bottleneck", "threshold"): PERCENT,  # percent of the time the GPU is idle
    ("io_bottleneck", "threshold"): PERCENT,
    ("load_balancing", "threshold"): FRACTION,  # a Jensen-Shannon distance
    ("feature_importance_overweight", "threshold"): FRACTION,  # a share of the importance
    ("low_feature_importance", "threshold"): FRACTION,
}


def parameter_range(rule: type, key: str) -> Range | None:
    """The range of parameter `key` of rule class `rule`, or None when it has none."""
    for klass in type.mro(rule):
        declared = klass.__dict__.get("bounds")
        if isinstance(declared, dict) and key in declared:
            return declared[key]
    found = BY_RULE.get((getattr(rule, "name", ""), key))
    if found is not None:
        return found
    found = BY_NAME.get(key)
    if found is None and key.endswith("_percent"):
        return PERCENT
    return found


def unknown_parameters(rule: str, unknown: set[str], allowed: dict[str, Any]) -> InvalidConfig:
    """The error for parameters a rule does not have: each with its closest known name."""
    hints = []
    for key in sorted(unknown):
        close = difflib.get_close_matches(key, list(allowed), n=1)
        hints.append(f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key))
    known = ", ".join(f"{k}={v!r}" for k, v in allowed.items()) or "none"
    return InvalidConfig(
        f"rule {rule!r}: unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
        f"its parameters: {known}"
    )


def checked(rule: type, key: str, value: Any, hint: Any) -> Any:
    """`value` for parameter `key` of `rule`: converted from text by its annotation, checked
    for type and range. Raises InvalidConfig naming the rule, the parameter, what it must be
    and its default."""
    name = getattr(rule, "name", rule.__name__)
    value = convert(name, key, value, hint)
    value = _typed(name, key, value, hint, getattr(rule, key, None))
    bound = parameter_range(rule, key)
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if bound is not None and is_number and value not in bound:
        raise InvalidConfig(
            f"rule {name!r}: {key}={value!r} is out of range: it must be {bound} "
            f"(default {getattr(rule, key, None)!r})"
        )
    return value


def _kinds(hint: Any) -> tuple[list[Any], bool]:
    """The types a hint allows, and whether it allows None."""
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return [a for a in args if a is not type(None)], type(None) in args
    return [hint], hint is None or hint is type(None) or hint is Any


def _typed(rule: str, key: str, value: Any, hint: Any, default: Any) -> Any:
    kinds, optional = _kinds(hint)
    if value is None:
        if optional or not any(k in (int, float, bool) for k in kinds):
            return value
        raise InvalidConfig(
            f"rule {rule!r}: {key} must be {_describe(kinds)}, not None (default {default!r})"
        )
    for kind in kinds:
        if kind is bool:
            if isinstance(value, bool):
                return value
        elif kind is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return value
            if isinstance(value, float) and value.is_integer():
                return int(value)
        elif kind is float:
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return float(value)
        elif kind is str:
            if isinstance(value, str):
                return value
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return str(value)  # `token_values: 0` in YAML
        elif kind in (list, tuple) or typing.get_origin(kind) in (list, tuple):
            if isinstance(value, (list, tuple)):
                return value
        else:
            return value  # a type this module does not know: the rule checks it
    raise InvalidConfig(f"rule {rule!r}: {key}={value!r} must be {_describe(kinds)} (default {default!r})")


def _describe(kinds: list[Any]) -> str:
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    said = [
        words.get(k) or ("a list" if k in (list, tuple) or typing.get_origin(k) in (list, tuple) else str(k))
        for k in kinds
    ]
    return " or ".join(dict.fromkeys(said))


def convert(rule: str, key: str, value: Any, hint: Any) -> Any:
    """Parameters arrive as strings from the command line and YAML: convert by annotation."""
    if not isinstance(value, str):
        return value
    args = typing.get_args(hint)
    kinds = [a for a in args if a is not type(None)] if args else [hint]
    if value.lower() in ("none", "null") and type(None) in args:
        return None
    for kind in kinds:
        try:
            if kind is bool:
                if value.lower() in ("true", "1", "yes"):
                    return True
                if value.lower() in ("false", "0", "no"):
                    return False
                continue
            if kind in (int, float):
                return kind(value)
            if typing.get_origin(kind) in (list, tuple) or kind in (list, tuple):
                return [v.strip() for v in value.split(",") if v.strip()]
            if kind is Mode:
                return Mode.parse(value)
            if kind is str:
                return value
        except (ValueError, InvalidConfig):
            continue
    raise InvalidConfig(f"rule {rule!r}: {key}={value!r} must be {_describe(kinds)}")
