"""Rule specs: how rules are named at the boundary (command line, YAML/JSON files, Python), and
how they become Rule objects.

A spec is a name (`"dead_relu"`, `"DeadRelu"`), a `"name:k=v,k2=v2"` string, a mapping
(`{"name": ..., **params}`), a Rule class or instance, or an smdebug-style rule object or
class. `resolve_rules` turns any of them (or a list) into Rule objects; `load_rule_config`
reads a list of them from a file.
"""

from __future__ import annotations

import copy
import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from mldbg.errors import InvalidConfig
from mldbg.rules.base import BUILTIN, Rule
from mldbg.rules.registry import default_rules, rule_class
from mldbg.rules.smdebug import SmdebugRule, is_smdebug_rule
from mldbg.trial import Trial

RuleSpec = str | Rule | type | Mapping[str, Any] | Any


def parse_rule_spec(text: str) -> tuple[str, dict[str, str]]:
    """`"name:k=v,k2=v2"` -> (name, {k: v}). A part without `=` continues the previous value,
    so lists need no quoting: `nlp_sequence_ratio:token_values=0,1,token_thresholds_percent=50,60`."""
    name, _, rest = text.partition(":")
    params: dict[str, str] = {}
    last: str | None = None
    for part in rest.split(","):
        if "=" in part:
            key, _, value = part.partition("=")
            last = key.strip()
            if not last:
                raise InvalidConfig(f"rule spec {text!r}: empty parameter name in {part!r}")
            params[last] = value.strip()
        elif part.strip():
            if last is None:
                raise InvalidConfig(f"rule spec {text!r}: expected k=v after ':', got {part!r}")
            params[last] += "," + part.strip()
    if not name.strip():
        raise InvalidConfig(f"rule spec {text!r}: no rule name")
    return name.strip(), params


def resolve_rules(specs: RuleSpec | Iterable[RuleSpec] | None, trial: Trial | None = None) -> list[Rule]:
    """Turn names, `"name:k=v"` strings, mappings (`{"name": ..., **params}`), Rule instances,
    Rule classes and smdebug-style rule objects into Rule objects. None (or `"default"`) is
    the default set."""
    if specs is None:
        return [cls(trial) for cls in default_rules()]
    rules: list[Rule] = []
    for spec in _listed(specs):
        rules.extend(_resolve_one(spec, trial))
    return rules


def _listed(specs: RuleSpec | Iterable[RuleSpec]) -> list[RuleSpec]:
    """`specs` as a list of single specs: one spec alone, or a mapping {name: {params}, ...}
    as its named specs."""
    if isinstance(specs, (str, Rule, type)) or isinstance(specs, Mapping) and "name" in specs:
        return [specs]
    if isinstance(specs, Mapping):  # {name: {params}, ...}
        return [named_spec(k, v, "rules") for k, v in specs.items()]
    return list(specs)


def chosen_rules(specs: RuleSpec | Iterable[RuleSpec] | None) -> set[str]:
    """The names of the rules `specs` names one by one (not the default set: None or
    `"default"`): the user chose them, so their findings are reported whatever their
    reliability (`mldbg.rules.diagnosis.REPORT_CONFIDENCE`)."""
    if specs is None:
        return set()
    out: set[str] = set()
    for spec in _listed(specs):
        if isinstance(spec, str):
            name, params = parse_rule_spec(spec)
            if name != "default" or params:
                out.add(name)
        elif isinstance(spec, Mapping):
            out.add(str(spec.get("name")))
        elif isinstance(spec, Rule) or (isinstance(spec, type) and issubclass(spec, Rule)):
            out.add(spec.name)
    return out


def _resolve_one(spec: RuleSpec, trial: Trial | None) -> list[Rule]:
    if isinstance(spec, str):
        name, params = parse_rule_spec(spec)
        if name == "default" and not params:
            return [cls(trial) for cls in default_rules()]
        return [_instantiate(rule_class(name), trial, params)]
    if isinstance(spec, Mapping):
        spec = dict(spec)
        name = spec.pop("name", None)
        if not isinstance(name, str):
            raise InvalidConfig(f"rule config {spec!r}: needs a 'name'")
        params = spec.pop("params", None) or spec.pop("parameters", None) or {}
        if not isinstance(params, Mapping):
            raise InvalidConfig(f"rule {name!r}: its params must be a mapping of k: v, got {params!r}")
        params = {**params, **spec}
        return [_instantiate(rule_class(name), trial, params)]
    if isinstance(spec, Rule):
        if spec.trial is None:
            spec.trial = trial
        return [spec]
    if isinstance(spec, type):
        return [_instantiate(spec, trial, {})]
    if is_smdebug_rule(spec):
        return [SmdebugRule(spec, trial)]
    raise InvalidConfig(f"not a rule: {spec!r} (give a name, a Rule, or an object with invoke_at_step)")


def _instantiate(cls: type[Any], trial: Trial | None, params: Mapping[str, Any]) -> Rule:
    if isinstance(cls, type) and issubclass(cls, Rule):
        return cls(trial, **params)
    if isinstance(cls, type) and is_smdebug_rule(cls):
        return SmdebugRule(cls(trial, **params), trial)
    raise InvalidConfig(f"{cls!r} is not a rule: subclass mldbg.rules.Rule or define invoke_at_step")


def unbound_copy(specs: RuleSpec | Iterable[RuleSpec] | None) -> Any:
    """A copy of rule specs to build rules from once more (one worker's rules): a rule object
    holds its trial, and must never be shared between workers, so only names, classes and
    mappings are accepted."""
    if specs is None:
        return None
    listed = [specs] if isinstance(specs, (str, Rule, type, Mapping)) else list(specs)
    for spec in listed:
        bound = isinstance(spec, Rule) and spec.trial is not None
        if bound or (not isinstance(spec, type) and is_smdebug_rule(spec)):
            raise InvalidConfig(
                f"rule {spec!r} is an object bound to a trial; to check each worker on its own, "
                "give its name, class or {'name': ..., **params}, so that every worker gets its own"
            )
    return copy.deepcopy(specs)


def load_rule_config(path: str | os.PathLike[str]) -> list[RuleSpec]:
    """Rule specs from a YAML or JSON file: a list of names / `{name: ..., k: v}` mappings,
    a mapping `{rule_name: {k: v}}`, or either under a top-level `rules:` key. A key that is
    neither `rules` nor a rule's name is refused, with the closest expected one."""
    from mldbg.config_file import load_file

    data = load_file(path)
    if isinstance(data, Mapping) and "rules" in data:
        check_keys(path, data, ("rules", "actions"))  # actions: for `mldbg watch`
        data = data["rules"]
    if isinstance(data, Mapping):
        for key in data:
            _rule_key(path, key)
        return [named_spec(k, v, path) for k, v in data.items()]
    if isinstance(data, list):
        out: list[RuleSpec] = []
        for item in data:
            if isinstance(item, Mapping) and "name" not in item and len(item) == 1:
                ((k, v),) = item.items()
                _rule_key(path, k)
                out.append(named_spec(k, v, path))
            elif isinstance(item, (str, Mapping)):
                out.append(item)
            else:
                raise InvalidConfig(f"{path}: a rule must be a name or a mapping, got {item!r}")
        return out
    raise InvalidConfig(
        f"{path}: expected a list of rules or a mapping of rule names to parameters "
        f"(e.g. 'rules: [dead_relu, {{name: loss_not_decreasing, num_steps: 20}}]'), got {data!r}"
    )


def named_spec(name: Any, params: Any, where: Any) -> dict[str, Any]:
    """`{name: params}` as a spec mapping, refusing parameters that are not a mapping."""
    if params is not None and not isinstance(params, Mapping):
        raise InvalidConfig(
            f"{where}: the parameters of rule {name!r} must be a mapping of k: v, got {params!r}"
        )
    return {"name": name, **(params or {})}


def check_keys(path: Any, data: Mapping[str, Any], expected: tuple[str, ...]) -> None:
    """Refuse top-level keys of a config file other than `expected`, with the closest one."""
    for key in data:
        if key not in expected:
            close = difflib.get_close_matches(str(key), expected, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidConfig(
                f"{path}: unknown key {key!r}{hint}; expected: {', '.join(map(repr, expected))}"
            )


def _rule_key(path: Any, key: Any) -> None:
    """A top-level key of a rule file: a rule's name, else an error with what was expected."""
    try:
        rule_class(str(key))
        return
    except InvalidConfig:
        pass
    close = difflib.get_close_matches(str(key), ["rules", *BUILTIN], n=3)
    hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
    raise InvalidConfig(
        f"{path}: unknown key {key!r}: {hint}expected 'rules' (a list of rules) or the names of rules "
        f"(see: mldbg check --list)"
    )
