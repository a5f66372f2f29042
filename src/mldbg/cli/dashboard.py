"""`mldbg dashboard PATH...`: serve a live dashboard of one or more runs in the browser."""

from __future__ import annotations

import socket
import sys
import threading
import webbrowser
from typing import Any

import click

from mldbg.errors import MldbgError


def _fail(message: str) -> None:
    click.echo(f"mldbg dashboard: error: {message}", err=True)
    sys.exit(2)


def _bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that `--port 0` can print the port it got."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        _fail(f"cannot resolve --host {host!r}: {e}")
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        _fail(
            f"cannot listen on {host}:{port}: {e.strerror or e} (pick another --port, or 0 for any free one)"
        )
    sock.listen(128)  # connections made before uvicorn starts wait in the backlog
    return sock


def _url(host: str, port: int) -> str:
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/"


@click.command("dashboard")
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface)."
)
@click.option(
    "--port", default=8000, show_default=True, type=int, help="Port to listen on (0: any free port)."
)
@click.option("--rule", "-r", "rules", multiple=True, metavar="NAME[:k=v,...]",
              help="A rule to run live on every run (repeatable; 'default' is the default set). "
                   "Without --rule, the default set runs.")  # fmt: skip
@click.option("--config", "config", type=click.Path(dir_okay=False), metavar="RULES.yaml",
              help="Rules from a YAML or JSON file, as `mldbg check --config`.")  # fmt: skip
@click.option("--no-rules", is_flag=True, help="Run no rules: only plot what was recorded.")
@click.option("--open/--no-open", "open_browser", default=False, show_default=True,
              help="Open the dashboard in the default web browser.")  # fmt: skip
@click.option("--refresh", "refresh_seconds", type=float, default=1.0, show_default=True,
              help="Seconds between looks for new steps.")  # fmt: skip
@click.option("--token", envvar="MLDBG_DASHBOARD_TOKEN", default=None, metavar="TOKEN",
              help="Require TOKEN on every request (env MLDBG_DASHBOARD_TOKEN). A non-loopback "
                   "--host without one gets a generated token, shown in the printed URL.")  # fmt: skip
@click.option("--allow-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="Another host name browsers may use to reach the dashboard (repeatable); "
                   "other Host headers are refused (DNS rebinding).")  # fmt: skip
def dashboard(
    paths: tuple[str, ...],
    host: str,
    port: int,
    rules: tuple[str, ...],
    config: str | None,
    no_rules: bool,
    open_browser: bool,
    refresh_seconds: float,
    token: str | None,
    allowed_hosts: tuple[str, ...],
) -> None:
    """Serve a live dashboard of the runs at PATH... (directories or s3://bucket/prefix).

    Losses (train and eval) of every run overlaid, any tensor's reductions and distribution
    over steps, and what the rules found, updated while training writes new steps. A PATH
    may not exist yet (the run shows as waiting); a folder of runs (a sweep) serves each run
    in it.

    \b
    Examples:
      mldbg dashboard ./runs/exp1
      mldbg dashboard ./sweep/lr_0.1 ./sweep/lr_1.0 --rule exploding_tensor --open
      mldbg dashboard ./sweep --port 0 --no-rules
    """
    try:
        import uvicorn

        from mldbg.dashboard.app import create_app
    except ModuleNotFoundError as e:
        _fail(f"the dashboard needs {e.name}: pip install 'mldbg[dashboard]'")
        return
    from mldbg.cli.runs import refuse_file

    for path in paths:  # a PATH may not exist yet (it waits), but a file never becomes a run
        try:
            refuse_file(path, "give the directory a hook records into, or a folder of runs")
        except MldbgError as e:
            _fail(str(e))
    if no_rules and (rules or config):
        _fail("--no-rules and --rule/--config contradict each other: give one")
    specs: list[Any] | None
    if no_rules:
        specs = []
    else:
        specs = list(rules)
        try:
            if config:
                from mldbg.rules.specs import load_rule_config

                specs += load_rule_config(config)
        except MldbgError as e:
            _fail(str(e))
        specs = specs or None
    try:
        app = create_app(list(paths), rules=specs, refresh_seconds=refresh_seconds, host=host, token=token,
                         allowed_hosts=allowed_hosts)  # fmt: skip
    except MldbgError as e:
        _fail(str(e))
        return
    sock = _bind(host, port)
    access = app.state.access
    access.port = sock.getsockname()[1]
    url = access.url(_url(host, access.port))
    if token is None and access.token is not None:
        click.echo(f"mldbg dashboard: listening on {host}, reachable from other machines: every request "
                   "needs the token in the URL below", err=True)  # fmt: skip
    runs = app.state.dashboard.runs
    names = ", ".join(list(runs)[:5]) + (f", ... ({len(runs)} runs)" if len(runs) > 5 else "")
    click.echo(f"mldbg dashboard: {names} at {url}  (Ctrl-C to stop)", nl=True)
    sys.stdout.flush()
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    from mldbg.dashboard.server import HeadTimeoutProtocol  # a bounded time to send a request head

    config_ = uvicorn.Config(app, log_level="warning", access_log=False, timeout_graceful_shutdown=2,
                             http=HeadTimeoutProtocol)  # fmt: skip
    uvicorn.Server(config_).run(sockets=[sock])
