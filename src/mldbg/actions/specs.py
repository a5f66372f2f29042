"""Actions by name: what a watch config (`actions: [{type: email, to: ...}]`), the
watcher and `Hook(actions=[...])` turn into `Action` objects.

A name is looked up among the built-in actions (`ACTIONS`, filled by `@register_action`),
then among the `mldbg.actions` entry points of installed packages, which load only when
named. A package adds an action with, in its pyproject.toml:

    [project.entry-points."mldbg.actions"]
    pager_duty = "my_package.alerts:PagerDuty"
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from mldbg.actions.base import ACTIONS, Action  # the package's __init__ registered the built-ins
from mldbg.errors import InvalidConfig, did_you_mean

ENTRY_POINT_GROUP = "mldbg.actions"

ActionSpec = Action | str | Mapping[str, Any]


def action_names() -> list[str]:
    """Every name an action can be built by: the built-ins and the installed entry points."""
    return sorted(set(ACTIONS) | {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)})


def action_class(name: str) -> type[Action]:
    """The action class named `name` (`email`, `stop`): built-in first, then the
    `mldbg.actions` entry points of installed packages."""
    key = name.strip().lower()
    found = ACTIONS.get(key)
    if found is not None:
        return found
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in (name.strip(), key):
            try:
                cls = ep.load()
            except Exception as e:
                raise InvalidConfig(
                    f"action {name!r}: its entry point {ep.value!r} failed to load: {e}"
                ) from e
            if not (isinstance(cls, type) and issubclass(cls, Action)):
                raise InvalidConfig(
                    f"action {name!r}: its entry point {ep.value!r} is {cls!r}, not a subclass of "
                    "mldbg.actions.Action"
                )
            return cls
    raise InvalidConfig(
        f"unknown type {name!r}; choose from {', '.join(action_names())}" + did_you_mean(name, action_names())
    )


def resolve_actions(specs: Iterable[ActionSpec]) -> list[Action]:
    """Action objects from Action objects, names (`"stop"`, `"log"`: the action with its
    defaults) and mappings with a `type` and its settings (`{"type": "email", "to": ...}`)."""
    out = []
    for i, spec in enumerate(specs):
        if isinstance(spec, Action):
            out.append(spec)
            continue
        if isinstance(spec, str):
            kind, settings = spec, {}
        elif isinstance(spec, Mapping) and "type" in spec:
            settings = dict(spec)
            kind = str(settings.pop("type"))
        else:
            raise InvalidConfig(
                f"action #{i + 1}: expected an Action, a name or an object with a 'type' of "
                f"{', '.join(action_names())}; got {spec!r}"
            )
        try:
            cls = action_class(kind)
        except InvalidConfig as e:
            raise InvalidConfig(f"action #{i + 1}: {e}") from None
        try:
            out.append(cls(**settings))
        except TypeError as e:
            raise InvalidConfig(f"action #{i + 1} ({kind}): {e}") from None
    return out


def from_config(specs: Iterable[Mapping[str, Any]]) -> list[Action]:
    """Actions from a config's list of `{"type": ..., **settings}` objects."""
    return resolve_actions(specs)
