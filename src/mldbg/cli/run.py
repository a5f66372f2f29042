"""`mldbg run -- python train.py ...`: an unmodified PyTorch script, recorded and watched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from mldbg.cli.runs import refuse_file
from mldbg.cli.watch import (
    EXIT_FOUND,
    announce,
    build,
    counted_findings,
    echo_diagnoses,
    echo_skips,
    make_watcher,
    watch_options,
    without_skips,
)
from mldbg.errors import CorruptRecord, InvalidConfig, RunNotFound
from mldbg.watch.autoattach import ENV_CONFIG, ENV_RUN, ENV_STOP_CODE, EXIT_STOPPED, write_bootstrap

DEFAULT_SAVE_INTERVAL = 10


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@watch_options
@click.option(
    "--out",
    "-o",
    default=None,
    metavar="DIR",
    help="Record into DIR (default: mldbg-runs/<script>-<date>-<time>).",
)
@click.option(
    "--hook-config",
    default=None,
    metavar="FILE",
    envvar=ENV_CONFIG,
    help="JSON/YAML hook config: collections, save and reduction configs (env MLDBG_CONFIG).",
)
@click.option(
    "--save-interval",
    type=int,
    default=None,
    metavar="N",
    help=f"Save tensors every N steps (default {DEFAULT_SAVE_INTERVAL}; losses every step).",
)
@click.option("--no-watch", is_flag=True, help="Only record; run no rules.")
@click.option("--overwrite", is_flag=True, help="Replace the run already in --out (else it is refused).")
@click.option(
    "--resume", is_flag=True, help="Continue the steps of the run already in --out (a restarted job)."
)
@click.option(
    "--fail-on-finding",
    is_flag=True,
    help="Exit 1 when a rule found an error (with --strict also a warning), for CI; "
    "a script that failed keeps its own exit code.",
)
@click.option(
    "--stop-grace",
    type=float,
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="After a stop request, end the script with SIGTERM if it is still running after SECONDS.",
)
@click.option(
    "--verbose", "-v", is_flag=True, help="Say why each rule that could not judge the run was skipped."
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run(command: tuple[str, ...], out: str | None, hook_config: str | None, save_interval: int | None,
        no_watch: bool, fail_on_finding: bool, stop_grace: float, verbose: bool, as_json: bool, flat: bool,
        json_diagnoses: bool, quiet: bool,
        poll_seconds: float, strict: bool, overwrite: bool, resume: bool, **options: Any) -> None:  # fmt: skip
    """Run COMMAND (e.g. `-- python train.py --lr 0.1`) with a PyTorch hook attached and
    the rules watching beside it; no change to the script.

    The first module that runs forward in train mode is recorded as the model, loss modules
    as losses, and each optimizer step ends a step. Exits with the script's exit code, 86
    when a rule stopped the training, 1 with --fail-on-finding when a rule found an error
    (with --strict also a warning) in a script that succeeded, 2 on a usage error.
    """
    from mldbg.store import layout, open_store

    command = tuple(c for c in command if c != "--") if command[:1] == ("--",) else command
    if not command:
        raise click.UsageError("give the command to run after --, e.g. mldbg run -- python train.py")
    if fail_on_finding and no_watch:
        raise click.UsageError("--fail-on-finding needs the rules: drop --no-watch")
    try:
        specs, actions = build(**options)
        out = out or _default_out(command)
        refuse_file(out, "give --out a directory for the run (a new one, or one to --overwrite / --resume)")
        hook = _hook_config(hook_config, out, save_interval, False if no_watch else specs)
    except (InvalidConfig, RunNotFound) as e:
        raise click.UsageError(str(e)) from None
    store = open_store(hook["out_dir"])
    _claim(store, hook, overwrite or bool(hook.get("overwrite")), resume or bool(hook.get("resume")))
    store.delete(layout.STOP_REQUEST)  # a stop request left by an earlier run is not for this one
    with tempfile.TemporaryDirectory(prefix="mldbg-run-") as boot:
        write_bootstrap(boot)
        config_path = Path(boot) / "hook.json"
        config_path.write_text(json.dumps(hook))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([boot, *filter(None, [env.get("PYTHONPATH")])])
        env[ENV_RUN], env[ENV_CONFIG], env[ENV_STOP_CODE] = "1", str(config_path), str(EXIT_STOPPED)
        click.echo(f"mldbg run: recording into {store.url}", err=True)
        try:
            child = subprocess.Popen(list(command), env=env)
        except OSError as e:
            raise click.ClickException(f"cannot start {command[0]!r}: {e.strerror or e}") from None
        supervisor = _Supervisor(child, stop_grace)
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        signal.signal(signal.SIGTERM, supervisor.forward)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends Ctrl-C to the script too
        watcher = None
        try:
            if not no_watch:
                watcher = make_watcher(
                    store.url, specs, actions, as_json=as_json, quiet=quiet, poll_seconds=poll_seconds,
                    label="mldbg run", alive=supervisor.alive, on_problem=without_skips(lambda: watcher),
                )  # fmt: skip
                supervisor.watcher = watcher
                watcher.start()
                announce(watcher)
                watcher.run()
            code = supervisor.wait()
            if watcher is not None and watcher.ended:
                echo_skips(
                    watcher,
                    verbose,
                    how="run",
                    complete=None if "include_collections" in _user_config(hook_config) else True,
                )
            if watcher is not None and watcher.ended and not flat and (json_diagnoses or not as_json):
                echo_diagnoses(watcher, as_json)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if child.poll() is None:
                child.kill()
                child.wait()
    if code == EXIT_STOPPED or supervisor.terminated or _stopped_by_rule(store):
        reason = watcher.context.stop_requested if watcher is not None else None
        click.echo(
            f"mldbg run: the training was stopped by a rule{': ' + reason if reason else ''}", err=True
        )
        sys.exit(EXIT_STOPPED)
    if code == 0 and fail_on_finding and watcher is not None and counted_findings(watcher, strict):
        click.echo(
            "mldbg run: the script succeeded, but rules fired (--fail-on-finding): exit status 1",
            err=True,
        )
        sys.exit(EXIT_FOUND)
    sys.exit(code)


def _user_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    from mldbg.config_file import load_file

    try:
        return dict(load_file(path) or {})
    except Exception:  # read and checked before the script started
        return {}


class _Supervisor:
    """Tells the watcher whether the script still runs; ends it if it ignores a stop."""

    def __init__(self, child: subprocess.Popen[bytes], grace: float):
        self.child = child
        self.grace = grace
        self.watcher: Any = None
        self.terminated = False
        self._stop_seen: float | None = None

    def alive(self) -> bool:
        if self.child.poll() is not None:
            return False
        self._enforce()
        return True

    def _enforce(self) -> None:
        if self.watcher is None or not self.watcher.context.stop_requested:
            return
        now = time.monotonic()
        if self._stop_seen is None:
            self._stop_seen = now
        elif now - self._stop_seen > self.grace and not self.terminated:
            click.echo(
                f"mldbg run: the script ignored the stop request for {self.grace:g}s; sending SIGTERM",
                err=True,
            )
            self.terminated = True
            self.child.terminate()

    def forward(self, signum: int, frame: Any) -> None:
        if self.child.poll() is None:
            self.child.send_signal(signum)

    def wait(self) -> int:
        while True:
            try:
                code = self.child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                self._enforce()
                late = self._stop_seen is not None and time.monotonic() - self._stop_seen > self.grace + 10
                if self.terminated and late:
                    self.child.kill()
        return 128 - code if code < 0 else code


def _default_out(command: tuple[str, ...]) -> str:
    name = next((Path(c).stem for c in command if c.endswith(".py")), None)
    if name is None and "-m" in command[:-1]:
        name = command[command.index("-m") + 1].split(".")[-1]
    name = name or Path(command[0]).name
    return str(Path("mldbg-runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")


def _hook_config(path: str | None, out: str, save_interval: int | None, specs: Any) -> dict[str, Any]:
    """The hook config for the script: the user's, completed with what the rules need."""
    from mldbg.config_file import hook_kwargs, load_file
    from mldbg.record.collections import DEFAULT_COLLECTIONS, DEFAULT_INCLUDED

    data: dict[str, Any] = dict(load_file(path) or {}) if path else {}
    data["out_dir"] = out
    hook_kwargs(data, path or "hook config")  # validate now, not in the child
    if save_interval is not None or "save_config" not in data:
        data["save_config"] = {"save_interval": save_interval or DEFAULT_SAVE_INTERVAL}
    if "collection_configs" not in data and save_interval is None:
        data["collection_configs"] = [{"name": "losses", "save_config": {"save_interval": 1}}]
    if "include_collections" not in data and not data.get("save_all") and specs is not False:
        from mldbg.rules.specs import resolve_rules

        needs = [n for r in resolve_rules(specs) for n in r.needed_collections() if n in DEFAULT_COLLECTIONS]
        data["include_collections"] = list(dict.fromkeys([*DEFAULT_INCLUDED, *needs]))
    return data


def _claim(store: Any, hook: dict[str, Any], overwrite: bool, resume: bool) -> None:
    """A run already in the out folder is refused, removed (`--overwrite`, before the watcher
    looks) or continued (`--resume`: its end markers go, so the watcher sees it live again)."""
    from mldbg.store import claim, layout

    if overwrite and resume:
        raise click.UsageError(
            "--overwrite replaces the earlier run, --resume continues it: give one of them"
        )
    try:
        claim.refuse_live(store, store.children(layout.WORKERS), "--overwrite or --resume")
    except InvalidConfig as e:
        raise click.UsageError(str(e)) from None
    workers = claim.run_workers(store)
    if not workers:
        return
    if overwrite:
        claim.remove_run(store)
        hook["overwrite"] = True
    elif resume:
        for w in workers:
            store.delete(layout.end_key(w))  # the hook resumes from its records
        hook["resume"] = True
    else:
        raise click.UsageError(
            f"{store.url} already holds a run ({claim.describe(store, workers)}): record into a new "
            "directory (--out), or give --overwrite to replace that run, or --resume to continue its steps"
        )


def _stopped_by_rule(store: Any) -> bool:
    from mldbg.store import layout, markers
    from mldbg.store.markers import End

    for worker in store.children(layout.WORKERS):
        try:
            end = markers.load(store, layout.end_key(worker), End)
        except CorruptRecord:
            continue
        if end is not None and end.stopped:
            return True
    return False
