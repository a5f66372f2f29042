"""A watcher started by the training process itself, as a child process.

`Hook(..., rules=[...], actions=[...])` calls `start_watcher` so that a user gets real-time
rules from one line. The rules run in the child, never in the training process, so they
cost training nothing but a core. The child ends by itself after its final pass once the
hook closes the run, or when the training process disappears.

The child is a fresh interpreter (`python -m mldbg.watch.inprocess SPEC`), not a fork: it
must not inherit the framework's threads, and it must not re-run the user's script (which
multiprocessing's spawn would do for a script without a `__main__` guard). Rules and
actions travel pickled: built-in and importable ones do, and so do names and config
objects of actions (`"stop"`, `{"type": "email", ...}`); classes defined in the user's
`__main__` do not (define them in a module).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mldbg.errors import InvalidConfig


class WatcherProcess:
    """Handle on a watcher child process."""

    def __init__(self, process: subprocess.Popen[bytes], spec_path: str):
        self.process = process
        self.pid = process.pid
        self._spec_path = spec_path

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 10.0) -> int | None:
        """Let the watcher make its final pass (call after the hook closed the run), then end
        it if it has not ended within `timeout` seconds. Returns its exit code."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.terminate()  # it saves its place and exits
            try:
                return self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                return self.process.wait()
        finally:
            Path(self._spec_path).unlink(missing_ok=True)


def checked_rules(rules: Any) -> list[Any] | None:
    """A hook's `rules=` as a list, their names and parameters checked now, in the training
    process, not in the watcher's child (classes and objects are the user's own code, built
    there): one rule's name or mapping, a `{name: params}` mapping, or a list of them."""
    from mldbg.rules.specs import named_spec, resolve_rules

    if rules is None:
        return None
    if isinstance(rules, str) or isinstance(rules, Mapping) and "name" in rules:
        rules = [rules]  # one rule: not a list of its characters or keys
    elif isinstance(rules, Mapping):
        rules = [named_spec(k, v, "rules") for k, v in rules.items()]
    rules = list(rules)
    resolve_rules([r for r in rules if isinstance(r, (str, Mapping))])
    return rules


def start_watcher(
    out_dir: str | os.PathLike[str],
    rules: Sequence[Any] | None = None,
    actions: Sequence[Any] = (),
    *,
    poll_seconds: float = 0.2,
    state: bool = True,
    quiet: bool = True,
    python: str | None = None,
) -> WatcherProcess:
    """Start a watcher of `out_dir` in a child process; it prints findings on this process's
    stderr as `mldbg: [rule] step N: ...`. `rules`: names, "name:k=v" strings, Rule objects
    or classes (None: the default set); `actions`: `mldbg.actions.Action` objects, names or
    `{"type": ..., **settings}` objects (a wrong one fails here, not in the child)."""
    from mldbg.actions.specs import resolve_actions
    from mldbg.store import open_store

    resolve_actions(actions)
    rules = checked_rules(rules)

    url = open_store(out_dir).url
    if url.startswith("memory://"):
        raise InvalidConfig(f"a watcher process cannot see {url}: in-memory runs live in one process")
    spec = {
        "path": url,
        "rules": rules,
        "actions": list(actions),
        "poll_seconds": poll_seconds,
        "state": state,
        "quiet": quiet,
        "parent": os.getpid(),
    }
    try:
        data = pickle.dumps(spec)
    except Exception as e:
        raise InvalidConfig(
            f"the watcher's rules and actions must be picklable to run in a child process: {e}. "
            "Pass rule names, or define custom rules and actions in an importable module."
        ) from None
    fd, spec_path = tempfile.mkstemp(prefix="mldbg-watch-", suffix=".pickle")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    env = {k: v for k, v in os.environ.items() if k not in ("MLDBG_RUN", "MLDBG_CONFIG")}
    env["MLDBG_PARENT_PATH"] = os.pathsep.join(sys.path)  # custom rules next to the script import
    process = subprocess.Popen(
        [python or sys.executable, "-m", "mldbg.watch.inprocess", spec_path],
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # a Ctrl-C meant for training must not kill the final pass
    )
    return WatcherProcess(process, spec_path)


def _parent_alive(pid: int) -> Any:
    def alive() -> bool:
        if os.getppid() != pid:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    return alive


def main(spec_path: str) -> int:
    import logging

    from mldbg.rules.base import Finding
    from mldbg.watch.progress import NoProgress, Progress
    from mldbg.watch.watcher import Watcher

    sys.path += [p for p in os.environ.get("MLDBG_PARENT_PATH", "").split(os.pathsep) if p not in sys.path]
    spec = pickle.loads(Path(spec_path).read_bytes())
    Path(spec_path).unlink(missing_ok=True)
    logging.basicConfig(level=logging.WARNING, format="mldbg: %(message)s")

    def show(finding: Finding) -> None:
        print(f"mldbg: {finding}", file=sys.stderr, flush=True)

    progress = NoProgress(label="mldbg watcher") if spec["quiet"] else Progress(label="mldbg watcher")

    def problem(text: str) -> None:
        if spec["quiet"] and text.startswith("rule ") and " skipped: " in text:
            return  # a rule without its data is expected beside a training: no noise
        progress.note(f"mldbg watcher: {text}")

    watcher = Watcher(
        spec["path"],
        spec["rules"],
        spec["actions"],
        poll_seconds=spec["poll_seconds"],
        state=spec["state"],
        progress=progress,
        on_finding=show,
        on_problem=problem,
        alive=_parent_alive(spec["parent"]),
    )
    import signal

    signal.signal(signal.SIGTERM, lambda *_: watcher.stop())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    started = time.monotonic()
    watcher.run()
    if watcher.findings:
        print(f"mldbg: the watcher reported {len(watcher.findings)} finding(s) in "
              f"{time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
