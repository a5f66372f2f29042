"""Hook settings from a JSON (or YAML) file: the boundary where configuration is parsed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from mldbg.config import CollectionConfig, ReductionConfig, SaveConfig
from mldbg.errors import InvalidConfig

HOOK_KEYS = {
    "out_dir", "save_config", "include_collections", "include_regex", "reduction_config",
    "save_all", "include_workers", "collection_configs", "profiler_config",
    "overwrite", "resume",  # replace, or continue, a run already in out_dir
    "statistics", "statistics_budget", "statistics_warmup", "statistics_every", "statistics_eager",  # the PyTorch hook's statistics
}  # fmt: skip


MAX_YAML_NODES = 100_000  # values a config file may hold once its aliases are expanded
_LOOP = -1  # `_expanded_size` of a node inside itself


def _expanded_size(root: Any) -> int:
    """How many values the composed YAML `root` holds with every alias expanded, counted without
    expanding (each node's size once, by identity); more than MAX_YAML_NODES stops the count
    (an alias bomb: a 1 KB file of nested aliases expands to billions); a node inside itself
    (a recursive alias) is `_LOOP`."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children: list[Any] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        if done:
            on_path.discard(key)
            sizes[key] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(c)] for c in children))
            if sizes[key] > MAX_YAML_NODES:
                return sizes[key]
            continue
        if key in sizes:
            continue
        if key in on_path:
            return _LOOP
        on_path.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in on_path:
                return _LOOP
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def load_file(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON or YAML file; errors name the file and the place."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise InvalidConfig(f"cannot read config {p}: {e.strerror}") from None
    if p.suffix in (".yaml", ".yml"):
        import yaml

        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            size = _expanded_size(node)
            if size == _LOOP or size > MAX_YAML_NODES:
                what = (
                    "refer to themselves (a loop)"
                    if size == _LOOP
                    else f"expand to more than {MAX_YAML_NODES:,} values"
                )
                raise InvalidConfig(
                    f"{p}: its aliases {what}, a YAML alias bomb; write the settings out without them"
                )
            return loader.construct_document(node)
        except yaml.YAMLError as e:
            raise InvalidConfig(f"{p}: invalid YAML: {' '.join(str(e).split())}") from None
        except RecursionError:
            raise InvalidConfig(f"{p}: nested too deep") from None
        finally:
            loader.dispose()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidConfig(f"{p}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None


def hook_kwargs(data: dict[str, Any], where: str = "hook config") -> dict[str, Any]:
    """Turn a parsed hook config into keyword arguments for any Hook."""
    if not isinstance(data, dict):
        raise InvalidConfig(f"{where}: expected an object with keys {sorted(HOOK_KEYS)}")
    unknown = set(data) - HOOK_KEYS
    if unknown:
        raise InvalidConfig(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(HOOK_KEYS)}")
    kwargs = dict(data)
    for key in ("overwrite", "resume", "save_all"):
        if key in kwargs and not isinstance(kwargs[key], bool):
            raise InvalidConfig(f"{where}: {key!r} must be true or false, got {kwargs[key]!r}")
    try:
        if "save_config" in kwargs and kwargs["save_config"] is not None:
            kwargs["save_config"] = SaveConfig.from_dict(kwargs["save_config"])
        if "reduction_config" in kwargs and kwargs["reduction_config"] is not None:
            kwargs["reduction_config"] = ReductionConfig.from_dict(kwargs["reduction_config"])
        if kwargs.get("profiler_config") is not None:
            from mldbg.profiler.config import ProfilerConfig

            kwargs["profiler_config"] = ProfilerConfig.from_dict(kwargs["profiler_config"])
        if "collection_configs" in kwargs and kwargs["collection_configs"] is not None:
            kwargs["collection_configs"] = [
                CollectionConfig.from_dict(c) for c in kwargs["collection_configs"]
            ]
    except InvalidConfig as e:
        raise InvalidConfig(f"{where}: {e}") from None
    except TypeError as e:
        raise InvalidConfig(f"{where}: {e}") from None
    if "out_dir" not in kwargs:
        raise InvalidConfig(f"{where}: 'out_dir' is required")
    return kwargs


def hook_kwargs_from_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    return hook_kwargs(load_file(path), str(path))
