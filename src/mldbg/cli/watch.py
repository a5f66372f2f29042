"""`mldbg watch`: run rules live beside a training job, and act when they fire."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from mldbg.errors import InvalidConfig, did_you_mean

EXIT_FOUND = 1  # a rule fired (as `mldbg check`)
EXIT_NO_RUN = 3  # --wait-timeout passed and the run never appeared
EXIT_INTERRUPTED = 130
STOP_ON = ("diagnosis", "finding")


def watch_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by `mldbg watch` and `mldbg run`."""
    options = [
        click.option("--rule", "-r", "rules", multiple=True, metavar="NAME[:k=v,...]",
                     help="A rule to run (repeatable). Default: the default set."),
        click.option("--stop", is_flag=True,
                     help="Stop the training on a diagnosis of severity error whose confidence reaches "
                          "--stop-confidence (see --stop-on)."),
        click.option("--stop-rule", "stop_rules", multiple=True, metavar="NAME",
                     help="Only these rules' findings count towards a stop (repeatable; implies --stop)."),
        click.option("--stop-on", default="diagnosis", show_default=True, metavar="diagnosis|finding",
                     help="diagnosis: stop on a confident error diagnosis (a warning never stops); "
                          "finding: stop on the first finding, whatever it is."),
        click.option("--stop-confidence", type=click.FloatRange(0.0, 1.0), default=None, metavar="P",
                     help="The confidence (0-1) from which an error diagnosis stops the training "
                          "(default 0.75)."),
        click.option("--signal", "stop_signal", default=None, metavar="SIG",
                     help="With --stop, also send SIG (e.g. SIGTERM) to the training processes on this host."),
        click.option("--email", "emails", multiple=True, metavar="ADDR",
                     help="Email findings to ADDR (repeatable). SMTP settings: MLDBG_SMTP_HOST, _PORT, "
                          "_TLS (none|starttls|ssl), _USER, _PASSWORD, _FROM."),
        click.option("--webhook", "webhooks", multiple=True, metavar="URL",
                     help="POST findings as JSON to URL (repeatable)."),
        click.option("--slack", is_flag=True, help="Send webhooks as Slack messages."),
        click.option("--metrics-port", type=int, default=None, metavar="N",
                     help="Serve Prometheus metrics on this port (0: any free port)."),
        click.option("--metrics-host", default="127.0.0.1", show_default=True, help="Address for --metrics-port."),
        click.option("--metrics-token", envvar="MLDBG_METRICS_TOKEN", default=None, metavar="TOKEN",
                     help="Require TOKEN (Bearer, basic-auth password or ?token=) for the metrics "
                          "(env MLDBG_METRICS_TOKEN); a non-loopback --metrics-host without one gets a "
                          "generated token, shown in the printed URL."),
        click.option("--metrics-file", default=None, metavar="PATH",
                     help="Write Prometheus metrics to this textfile (node_exporter)."),
        click.option("--log-file", default=None, metavar="PATH", help="Append findings as JSON lines to PATH."),
        click.option("--every-finding", is_flag=True,
                     help="Alert every distinct finding, not once per rule per run."),
        click.option("--config", "config_path", default=None, metavar="FILE",
                     help="YAML/JSON with 'rules' and 'actions' ([{type: email, to: ...}, ...]; a type is "
                          "a built-in action or an installed 'mldbg.actions' entry point)."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print one JSON object per finding as it comes (with --diagnoses, then one per "
                          "diagnosis at the end)."),
        click.option("--findings", "flat", is_flag=True,
                     help="Print only the findings, not the diagnoses they add up to at the end."),
        click.option("--diagnoses", "json_diagnoses", is_flag=True,
                     help="With --json, also print one JSON object per diagnosis once the training ended "
                          "(without --json the diagnoses are printed anyway, unless --findings)."),
        click.option("--strict", is_flag=True,
                     help="Count warnings (machine-dependent findings: the profiler rules) as failures "
                          "too; without it only errors make the exit status 1."),
        click.option("--quiet", "-q", is_flag=True, help="No progress line."),
        click.option("--poll", "poll_seconds", type=float, default=0.2, show_default=True,
                     help="Seconds between looks for new steps."),
    ]  # fmt: skip
    for option in reversed(options):
        f = option(f)
    return f


def build(
    rules: tuple[str, ...],
    stop: bool,
    stop_rules: tuple[str, ...],
    stop_signal: str | None,
    emails: tuple[str, ...],
    webhooks: tuple[str, ...],
    slack: bool,
    metrics_port: int | None,
    metrics_host: str,
    metrics_file: str | None,
    metrics_token: str | None,
    log_file: str | None,
    every_finding: bool,
    config_path: str | None,
    stop_on: str = "diagnosis",
    stop_confidence: float | None = None,
) -> tuple[list[Any] | None, list[Any]]:
    """Rule specs and actions from the command line and an optional config file."""
    from mldbg.actions import Email, Log, Metrics, StopTraining, Webhook, resolve_actions

    gate: dict[str, Any] = {"once_per_rule": False} if every_finding else {}
    specs: list[Any] = list(rules)
    actions: list[Any] = []
    if config_path:
        from mldbg.config_file import load_file
        from mldbg.rules.specs import check_keys, named_spec

        data = load_file(config_path) or {}
        if not isinstance(data, dict):
            raise InvalidConfig(f"{config_path}: expected an object with 'rules' and/or 'actions'")
        check_keys(config_path, data, ("rules", "actions"))
        for item in data.get("rules") or []:
            if isinstance(item, dict) and "name" in item:  # {name: rule, k: v, ...}
                specs.append(item)
            elif isinstance(item, dict):  # {rule: {k: v}}
                specs += [named_spec(name, params, config_path) for name, params in item.items()]
            else:
                specs.append(str(item))
        actions += resolve_actions(data.get("actions") or [])
    if stop_on not in STOP_ON:  # not a click.Choice: `mldbg run` passes its options on to the script
        raise InvalidConfig(
            f"--stop-on {stop_on!r} is not one of {', '.join(map(repr, STOP_ON))}{did_you_mean(stop_on, STOP_ON)}"
        )
    if stop or stop_rules or stop_signal:
        actions.append(StopTraining(
            signal=stop_signal, rules=stop_rules or None, on=stop_on, min_confidence=stop_confidence
        ))  # fmt: skip
    actions += [Email(list(emails), **gate)] if emails else []
    actions += [Webhook(url, slack=slack, **gate) for url in webhooks]
    if metrics_port is not None or metrics_file:
        actions.append(Metrics(metrics_port, host=metrics_host, token=metrics_token, textfile=metrics_file))
    if log_file:
        actions.append(Log(log_file))
    return (specs or None), actions


def printer(as_json: bool) -> Callable[[Any], None]:
    def show(finding: Any) -> None:
        if as_json:
            click.echo(json.dumps(finding.to_dict()))
        else:  # a finding on one worker (--per-worker) names it
            click.echo(f"{finding.worker}: {finding}" if finding.worker else str(finding))
        sys.stdout.flush()

    return show


def echo_diagnoses(watcher: Any, as_json: bool) -> None:
    """After the final pass: the watcher's findings grouped into diagnoses (the per-finding
    lines came as they were found), one block or JSON object per diagnosis."""
    from mldbg.cli.check import diagnoses_of, echo_diagnosis, echo_unconfirmed

    echo_unconfirmed(watcher.held, "watch")
    if not watcher.findings:
        return
    diagnoses = diagnoses_of(list(watcher.findings), watcher.trial, watcher.rules)
    if not as_json:
        n = len(diagnoses)
        click.echo(f"\n{n} diagnos{'es' if n != 1 else 'is'} of {len(watcher.findings)} finding(s):")
    for d in diagnoses:
        echo_diagnosis(d, as_json)
    sys.stdout.flush()


def make_watcher(path: str, specs: list[Any] | None, actions: list[Any], *, as_json: bool, quiet: bool,
                 poll_seconds: float, label: str, **kwargs: Any) -> Any:  # fmt: skip
    from mldbg.watch.progress import NoProgress, Progress
    from mldbg.watch.watcher import Watcher

    progress = NoProgress(label=label) if quiet else Progress(label=label)
    return Watcher(path, specs, actions, poll_seconds=poll_seconds, progress=progress,
                   on_finding=printer(as_json), **kwargs)  # fmt: skip


def without_skips(watcher: Any) -> Any:
    """The watcher's notes, less one line per skipped rule: those come as one summary at the
    end (`echo_skips`), most being about what the script does not use."""

    def note(text: str) -> None:
        if text.startswith("rule ") and " skipped: " in text:
            return
        progress = watcher().progress
        progress.note(f"{progress.label}: {text}")

    return note


def echo_skips(watcher: Any, verbose: bool, how: str | None, complete: bool | None) -> None:
    """One line: the rules that ran, what fired, the rules that could not judge and why in a
    word; with --verbose each skipped rule with its reason. `how` and `complete` as
    `mldbg.report.skips.explain` takes them (how the run was recorded, if known)."""
    from mldbg.report.skips import explain, reasons, summary

    runner = watcher.runner
    if runner is None:
        return
    skips = explain(runner.skipped, runner.rules, watcher.trial, how=how,
                    unchecked=runner.unchecked, complete=complete)  # fmt: skip
    label = watcher.progress.label
    if verbose:
        for line in reasons(skips):
            click.echo(f"{label}: {line}", err=True)
    ran = len(runner.rules) - len(runner.skipped) - len(runner.errors)
    findings = list(watcher.findings)
    steps = watcher.context.steps_checked
    where = f"over {steps} step{'s' if steps != 1 else ''}"
    shown = [] if verbose else skips
    line = summary(shown, ran, len({f.rule for f in findings}), len(findings), where, f"{label} --verbose")
    click.echo(f"{label}: {line}", err=True)


def announce(watcher: Any) -> None:
    """Say where the metrics are served (the port may have been picked by the system)."""
    from mldbg.actions import Metrics

    for action in watcher.actions:
        if isinstance(action, Metrics) and action.port is not None:
            click.echo(f"{watcher.progress.label}: metrics at {action.url}", err=True)


@click.command()
@click.argument("path")
@watch_options
@click.option(
    "--state",
    "state_path",
    default=None,
    metavar="FILE",
    help="Keep the watcher's place in FILE (default: watch/<id>.json in the run).",
)
@click.option("--no-state", is_flag=True, help="Do not keep a place: a restart reports everything again.")
@click.option(
    "--pid",
    type=int,
    default=None,
    help="The training's pid: if it dies without closing the run, make the final pass and exit.",
)
@click.option(
    "--wait-timeout",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Give up (exit 3) if no step is written within SECONDS.",
)
@click.option("--per-worker", is_flag=True,
              help="Check each worker of a multi-worker run on its own (the rules otherwise read the first).")  # fmt: skip
@click.option(
    "--verbose", "-v", is_flag=True, help="Say why each rule that could not judge the run was skipped."
)
def watch(path: str, state_path: str | None, no_state: bool, pid: int | None, wait_timeout: float | None,
          per_worker: bool, verbose: bool, as_json: bool, flat: bool, json_diagnoses: bool, quiet: bool, poll_seconds: float,
          strict: bool,
          **options: Any) -> None:  # fmt: skip
    """Run rules on PATH while it is written (it may not exist yet), until training ends.

    A step is checked as soon as the next one is written (while training runs, more
    records of the newest step may still come), then acted on. A restarted watcher resumes
    where it stopped and does not alert old findings again. Exit 0 when nothing fired,
    1 when a rule found an error (with --strict also a warning), 2 on a usage error (a bad
    rule, parameter or config), 3 when the run never appeared (--wait-timeout).
    """
    from mldbg.cli.runs import refuse_folder_of_runs
    from mldbg.watch.watcher import WatchTimeout

    refuse_folder_of_runs(path)
    watcher: Any = None  # the notes' filter reads it once it is made
    try:
        specs, actions = build(**options)
        watcher = make_watcher(
            path, specs, actions, as_json=as_json, quiet=quiet, poll_seconds=poll_seconds, label="mldbg watch",
            state=False if no_state else (state_path or True), wait_timeout=wait_timeout,
            alive=None if pid is None else _pid_alive(pid), per_worker=per_worker,
            **({} if as_json else {"on_problem": without_skips(lambda: watcher)}),
        )  # fmt: skip
    except InvalidConfig as e:
        raise click.UsageError(str(e)) from None
    previous = signal.signal(signal.SIGTERM, lambda *_: watcher.stop())
    try:
        watcher.start()
        announce(watcher)
        watcher.run()
    except WatchTimeout as e:
        click.echo(f"mldbg watch: {e}", err=True)
        sys.exit(EXIT_NO_RUN)
    except KeyboardInterrupt:
        sys.exit(EXIT_INTERRUPTED)
    finally:
        signal.signal(signal.SIGTERM, previous)
    if not watcher.ended:  # stopped by a signal: the place is saved, a restart resumes
        sys.exit(EXIT_INTERRUPTED)
    if not flat and (json_diagnoses or not as_json):
        echo_diagnoses(watcher, as_json)
    if not as_json:
        echo_skips(watcher, verbose, how=None, complete=None)
    if as_json:  # the text output said it as the watcher's notes ("rule X skipped: why")
        from mldbg.cli.check import echo_unchecked

        for name, why in getattr(watcher.runner, "unchecked", {}).items():
            echo_unchecked(name, why, as_json)
    sys.exit(EXIT_FOUND if counted_findings(watcher, strict) else 0)


def counted_findings(watcher: Any, strict: bool) -> int:
    """How many findings make `watch` or `run` exit 1: errors (and warnings with `strict`),
    this watcher's and those an earlier watcher of the run reported before a restart (its
    saved state keeps how many of them were errors)."""
    from mldbg.cli.check import failing

    mine = watcher.findings
    if strict:
        earlier = watcher.context.findings - len(mine)
    else:
        earlier = watcher.state.errors - sum(1 for f in mine if f.severity == "error")
    return len(failing(mine, strict)) + max(0, earlier)


def _pid_alive(pid: int) -> Callable[[], bool]:
    import os

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    return alive
