"""The real dashboard server in its own process, a JSON client over real HTTP, and a tiny real
PyTorch training in a thread that pauses on request (to record steps while a client looks)."""

from __future__ import annotations

import json
import re
import selectors
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import torch
from torch import nn

import mldbg
import mldbg.torch


class Server:
    """`mldbg dashboard PATH... --port 0` as a subprocess; `url` is what it printed."""

    def __init__(self, *args: str, refresh: float = 0.2, log: Path | None = None):
        cmd = [sys.executable, "-m", "mldbg.cli.main", "dashboard", *args]
        cmd += ["--port", "0", "--refresh", str(refresh)]
        self.stderr = open(log, "w+") if log else subprocess.DEVNULL  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.stderr, text=True)
        self.banner = self._first_line(timeout=60)
        found = re.search(r"http://\S+/", self.banner)
        if not found:
            self.stop()
            raise AssertionError(f"no URL in the dashboard's first line: {self.banner!r}")
        self.url = found.group(0)

    def _first_line(self, timeout: float) -> str:
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                raise AssertionError(f"the dashboard printed nothing in {timeout}s")
            line = self.proc.stdout.readline()
        finally:
            sel.close()
        if not line:
            self.proc.wait(timeout=10)
            raise AssertionError(f"the dashboard exited with {self.proc.returncode} before serving")
        return line

    def get(self, path: str, **params: Any) -> tuple[int, Any]:
        return get(self.url + path.lstrip("/") + (("?" + urllib.parse.urlencode(params)) if params else ""))

    def json(self, path: str, **params: Any) -> Any:
        status, body = self.get(path, **params)
        assert status == 200, (path, params, status, body)
        return body

    def wait_for(self, path: str, predicate: Any, timeout: float = 30, **params: Any) -> Any:
        """Poll `path` until `predicate(body)`; returns that body."""
        deadline = time.monotonic() + timeout
        body = None
        while time.monotonic() < deadline:
            body = self.json(path, **params)
            if predicate(body):
                return body
            time.sleep(0.1)
        raise AssertionError(f"{path} never met the condition in {timeout}s; last answer: {body}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        if self.stderr is not subprocess.DEVNULL:
            self.stderr.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def get(url: str) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body) of a GET, errors included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.loads(e.read())


def run_url(name: str) -> str:
    return "api/runs/" + urllib.parse.quote(name, safe="/")


class LiveTraining(threading.Thread):
    """A tiny real training recorded with mldbg.torch.Hook, in a thread: `first` optimizer steps
    (an evaluation forward every `eval_every`), then it waits for `go`, then `rest` more steps,
    then `hook.close()` ends the run."""

    def __init__(self, out_dir: str | Path, first: int, rest: int, lr: float = 0.1, eval_every: int = 5):
        super().__init__(daemon=True)
        self.out_dir = str(out_dir)
        self.first, self.rest, self.lr, self.eval_every = first, rest, lr, eval_every
        self.paused = threading.Event()
        self.go = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._train()
        except BaseException as e:
            self.error = e
            self.paused.set()

    def _train(self) -> None:
        torch.manual_seed(0)
        x = torch.randn(64, 8)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        loss_fn = nn.CrossEntropyLoss()
        opt = torch.optim.SGD(model.parameters(), lr=self.lr)
        hook = mldbg.torch.Hook(
            self.out_dir, save_config=mldbg.SaveConfig(save_interval=1), flush_seconds=0.05
        )
        hook.register_module(model)
        hook.register_loss(loss_fn)
        for step in range(self.first + self.rest):
            if step == self.first:
                hook.recorder.flush()  # what was recorded so far is readable while paused
                self.paused.set()
                if not self.go.wait(timeout=120):
                    raise TimeoutError("LiveTraining: nobody set `go` within 120 s")
            model.train()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            if self.eval_every and (step + 1) % self.eval_every == 0:
                model.eval()
                with torch.no_grad():
                    loss_fn(model(x), y)
            time.sleep(0.01)
        hook.close()

    def finish(self, timeout: float = 60) -> None:
        self.go.set()
        self.join(timeout)
        assert not self.is_alive(), "LiveTraining did not end"
        if self.error is not None:
            raise self.error


class Events:
    """A reader of the dashboard's server-sent events (`GET /api/events`) over real HTTP."""

    def __init__(self, url: str, timeout: float = 30, last_event_id: str | None = None):
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        request = urllib.request.Request(url + "api/events", headers=headers)
        self.response = urllib.request.urlopen(request, timeout=timeout)
        self.headers = self.response.headers
        self.history: list[tuple[str, Any, str | None]] = []  # every event read, in order

    def next(self) -> tuple[str, Any, str | None]:
        """The next event: (name, decoded data, id); comments (pings) are skipped."""
        name, data, seq = "message", [], None
        while True:
            line = self.response.readline()
            if not line:
                raise EOFError("the event stream ended")
            text = line.decode().rstrip("\n")
            if not text:
                if data:
                    self.history.append((name, json.loads("\n".join(data)), seq))
                    return self.history[-1]
                continue
            if text.startswith(":"):
                continue
            key, _, value = text.partition(": ")
            if key == "event":
                name = value
            elif key == "data":
                data.append(value)
            elif key == "id":
                seq = value

    def wait_for(
        self, predicate: Any, timeout: float = 30, seen: bool = False
    ) -> tuple[str, Any, str | None]:
        """Read events until `predicate(name, data)`; returns that event. `seen=True` first
        looks among the events already read (one that came while waiting for another)."""
        if seen:
            for event in self.history:
                if predicate(event[0], event[1]):
                    return event
        deadline = time.monotonic() + timeout
        seen = []
        while time.monotonic() < deadline:
            event = self.next()
            if predicate(event[0], event[1]):
                return event
            seen.append(event[0])
        raise AssertionError(f"no such event within {timeout}s; saw {seen[-20:]}")

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> Events:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
