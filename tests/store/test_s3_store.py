"""S3Store against a real SeaweedFS: the Store contract, ranged reads and the cache, multipart,
spill while the server is down, upload_from, and adoption of a dead process's spill queue."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest
from tests.waiting import wait_until

from mldbg.errors import InvalidConfig, StoreError
from mldbg.store import open_store
from mldbg.store.s3 import S3Options, S3Store

try:
    from .s3server import BUCKET, point_env_at
except ImportError:
    from s3server import BUCKET, point_env_at

IDX = "workers/worker_0/index/"


def test_open_store_gives_an_s3_store(s3_url):
    store = open_store(s3_url)
    assert isinstance(store, S3Store)
    assert store.url == s3_url
    assert store.options.endpoint_url == os.environ["MLDBG_S3_ENDPOINT"]


def test_bad_urls_are_refused():
    with pytest.raises(InvalidConfig, match="names no bucket"):
        S3Store("s3:///run")
    with pytest.raises(InvalidConfig, match="plain relative path"):
        S3Store("s3://bucket/a/../b")


def test_the_settings_are_one_object(monkeypatch, tmp_path):
    """S3Options: what is left out comes from the environment; open_store's keywords build one."""
    monkeypatch.setenv("MLDBG_S3_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", "0.7")
    monkeypatch.setenv("MLDBG_S3_CACHE_MB", "2")
    monkeypatch.setenv("MLDBG_S3_SPILL", "0")
    options = S3Options(retry_seconds=3.0)
    assert (options.endpoint_url, options.block_seconds, options.cache_bytes, options.spill) == (
        "http://127.0.0.1:9", 0.7, 2 << 20, False,
    )  # fmt: skip
    assert options.retry_seconds == 3.0 and options.close_timeout == 60.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.block_seconds = 1.0  # type: ignore[misc]
    store = S3Store("s3://bucket/run", options)
    assert store.options is options and store.cache.max_bytes == 2 << 20
    assert store.uploader is None and store.pending == 0  # spill off: no spill queue
    opened = open_store("s3://bucket/run", block_seconds=None, exists_ttl=0.5)
    assert opened.options.block_seconds == 0.7 and opened.options.exists_ttl == 0.5  # None: the environment
    with pytest.raises(InvalidConfig, match="'spil_max_bytes' is not an S3 setting.*spill_max_bytes"):
        open_store("s3://bucket/run", spil_max_bytes=1000)
    monkeypatch.setenv("MLDBG_S3_BLOCK_SECONDS", "soon")
    with pytest.raises(InvalidConfig, match="MLDBG_S3_BLOCK_SECONDS='soon'"):
        S3Options()


def test_store_contract(s3_url):
    store = open_store(s3_url)
    store.write(IDX + "0000000002.safetensors", [b"two"])
    store.write(IDX + "0000000001.safetensors", [b"o", memoryview(b"ne")])
    data = np.arange(100, dtype=np.float32)
    store.write("workers/worker_0/data/0000000001.safetensors", [b"head", data])
    store.write("workers/worker_1/meta.json", [b"{}"])

    assert store.read(IDX + "0000000001.safetensors") == b"one"
    assert store.read("workers/worker_0/data/0000000001.safetensors", 4, 400) == data.tobytes()
    assert store.read("workers/worker_0/data/0000000001.safetensors", 8, 8) == data[1:3].tobytes()
    assert store.read("workers/worker_1/meta.json", 1) == b"}"
    assert store.read("workers/worker_1/meta.json", 10, 5) == b""  # past the end: a short read
    assert store.size("workers/worker_0/data/0000000001.safetensors") == 404
    assert store.list(IDX) == [IDX + "0000000001.safetensors", IDX + "0000000002.safetensors"]
    assert store.list(IDX, IDX + "0000000001.safetensors") == [IDX + "0000000002.safetensors"]
    assert store.list("workers/") == sorted(
        [IDX + "0000000001.safetensors", IDX + "0000000002.safetensors",
         "workers/worker_0/data/0000000001.safetensors", "workers/worker_1/meta.json"]
    )  # fmt: skip
    assert store.list("nothing/") == []
    assert store.children("workers/") == ["worker_0", "worker_1"]
    assert store.children("") == ["workers"]
    assert store.exists("workers/worker_1/meta.json")
    assert not store.exists("workers/worker_1/END")

    with pytest.raises(FileNotFoundError):
        store.read("workers/worker_1/END")
    with pytest.raises(FileNotFoundError):
        store.size("workers/worker_1/END")

    store.write("workers/worker_1/meta.json", [b'{"v": 2}'])  # a rewrite replaces the whole object
    assert store.read("workers/worker_1/meta.json") == b'{"v": 2}'
    store.delete("workers/worker_1/meta.json")
    store.delete("workers/worker_1/meta.json")  # deleting what is gone is fine
    assert not store.exists("workers/worker_1/meta.json")
    assert store.list("workers/worker_1/") == []  # (SeaweedFS still lists the empty folder in children)


def test_keys_stay_inside_the_prefix(s3_url, s3_server):
    store = open_store(s3_url)
    for bad in ("../escape", "/abs", "a/../../b", "a//b", "a\\b", ""):
        with pytest.raises(StoreError):
            store.write(bad, [b"x"])
        with pytest.raises(StoreError):
            store.read(bad)
    other = open_store(s3_url + "-other")
    other.write("workers/worker_0/meta.json", [b"{}"])
    assert store.list("") == [] and store.children("") == []  # a sibling prefix is not inside
    listed = s3_server.client().list_objects_v2(Bucket=BUCKET, Prefix=s3_url.split("/", 3)[3] + "-other/")
    assert [o["Key"].rsplit("-other/", 1)[1] for o in listed["Contents"]] == ["workers/worker_0/meta.json"]


def test_ranged_reads_go_through_the_block_cache(s3_url):
    store = S3Store(s3_url, S3Options(block_bytes=4096, cache_bytes=64 << 10))
    blob = np.random.default_rng(0).integers(0, 255, 20_000, dtype=np.uint8).tobytes()
    key = "workers/worker_0/data/0000000001.safetensors"
    store.write(key, [blob])
    reader = S3Store(s3_url, S3Options(block_bytes=4096, cache_bytes=64 << 10))
    gets = lambda: reader.requests["GetObject"]  # noqa: E731
    assert reader.read(key, 10, 100) == blob[10:110]
    assert gets() == 1
    assert reader.read(key, 200, 300) == blob[200:500]  # same block: no request
    assert reader.read(key, 3000, 3000) == blob[3000:6000]  # block 1 is missing: one more GET
    assert gets() == 2
    assert reader.read(key, 19_990, 100) == blob[19_990:]  # the object ends: a short read
    assert reader.read(key, 0, 20_000) == blob
    assert reader.bytes_received <= 2 * len(blob)
    assert reader.cache.bytes <= reader.cache.max_bytes
    # mutable files (meta.json, END, control/stop) are never cached
    reader.read(key, 0, 10)
    n = gets()
    store.write("control/stop", [b"1"])
    assert reader.read("control/stop") == b"1"
    store.write("control/stop", [b"2"])
    assert reader.read("control/stop") == b"2"
    assert gets() == n + 2


def test_the_cache_stays_within_its_bound(s3_url):
    store = S3Store(s3_url, S3Options(block_bytes=1024, cache_bytes=8 * 1024))
    for i in range(5):
        store.write(f"workers/worker_0/data/{i:010d}.safetensors", [bytes([i]) * 5000])
    for i in range(5):
        for off in range(0, 5000, 700):
            assert store.read(f"workers/worker_0/data/{i:010d}.safetensors", off, 10) == bytes([i]) * 10
    assert 0 < store.cache.bytes <= 8 * 1024


def test_large_objects_use_multipart_and_read_back(s3_url):
    store = S3Store(s3_url, S3Options(multipart_bytes=5 << 20))  # S3's smallest part
    blob = np.random.default_rng(1).integers(0, 255, 11 << 20, dtype=np.uint8)
    store.write("workers/worker_0/data/0000000001.safetensors", [b"h" * 8, blob, b"tail"])
    assert store.requests["CreateMultipartUpload"] == 1
    assert store.requests["UploadPart"] == 3
    assert store.requests["PutObject"] == 0
    back = open_store(s3_url).read("workers/worker_0/data/0000000001.safetensors")
    assert back == b"h" * 8 + blob.tobytes() + b"tail"


def test_missing_bucket_is_a_clear_error(s3_env):
    store = open_store(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/run")
    with pytest.raises(StoreError, match="does not exist"):  # (SeaweedFS creates buckets on PUT)
        store.list("workers/")


def test_upload_from_writes_locally_and_uploads_in_the_background(s3_url, tmp_path):
    local = tmp_path / "run"
    store = S3Store(s3_url, S3Options(upload_from=local))
    for i in range(1, 6):
        store.write(f"{IDX}{i:010d}.safetensors", [f"segment {i}".encode()])
    store.delete(f"{IDX}{3:010d}.safetensors")
    assert (local / IDX / "0000000001.safetensors").read_bytes() == b"segment 1"
    assert store.read(f"{IDX}0000000005.safetensors") == b"segment 5"  # own writes, uploaded or not
    assert store.drain(30)
    expected = [f"{IDX}{i:010d}.safetensors" for i in (1, 2, 4, 5)]
    assert open_store(s3_url).list(IDX) == expected
    assert sorted(p.relative_to(local).as_posix() for p in local.rglob("*.safetensors")) == expected
    store.close()
    assert store.spill_dir is None  # nothing left buffered: the queue directory is gone


def test_a_down_server_spills_within_the_bound_and_uploads_in_order(own_s3_server, monkeypatch, tmp_path):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    url = f"s3://{BUCKET}/spill-{uuid.uuid4().hex[:8]}"
    store = S3Store(url, S3Options(block_seconds=1.0, multipart_bytes=5 << 20))
    store.write(f"{IDX}0000000001.safetensors", [b"1"])
    own_s3_server.stop()
    big = np.random.default_rng(2).integers(0, 255, 6 << 20, dtype=np.uint8)

    t0 = time.monotonic()
    store.write(f"{IDX}0000000002.safetensors", [b"2"])  # waits up to the bound, then spills
    first = time.monotonic() - t0
    t0 = time.monotonic()
    for i in range(3, 30):
        store.write(f"{IDX}{i:010d}.safetensors", [str(i).encode()])  # the queue is not empty: no wait
    store.write("workers/worker_0/data/0000000001.safetensors", [big])  # spilled, then multipart
    store.write("workers/worker_0/END", [b"{}"])
    rest = time.monotonic() - t0
    assert first < 2.0 and rest < 1.0
    assert store.spilled == 30 and store.pending == 30
    with pytest.raises(StoreError, match="unreachable"):
        store.exists("control/stop")  # fails fast: the uploader probes, not the training thread
    assert store.read(f"{IDX}0000000007.safetensors") == b"7"  # this process reads its own writes
    assert len(list(store.spill_dir.glob("*.obj"))) == 30

    own_s3_server.start()
    assert store.drain(30)
    reader = open_store(url)
    assert reader.list(IDX) == [f"{IDX}{i:010d}.safetensors" for i in range(1, 30)]
    assert reader.read("workers/worker_0/END") == b"{}"
    assert reader.read("workers/worker_0/data/0000000001.safetensors") == big.tobytes()
    assert store.requests["UploadPart"] >= 2
    assert store.uploaded == 30 and store.exists("control/stop") is False
    store.close()
    assert list((tmp_path / "spill").iterdir()) == []


def test_spill_off_raises_within_the_bound(own_s3_server, monkeypatch, tmp_path):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    store = S3Store(f"s3://{BUCKET}/nospill", S3Options(spill=False, block_seconds=0.5))
    own_s3_server.stop()
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="did not answer|unreachable"):
        store.write("workers/worker_0/meta.json", [b"{}"])
    # within block_seconds and the connection's own refusal, not the client's retries (tens of
    # seconds); a loaded CI machine took 2.8 s here, so the margin is wide
    assert time.monotonic() - t0 < 10.0
    with pytest.raises(StoreError):
        store.list("workers/")
    own_s3_server.start()


SPILL_AND_DIE = """
import os, sys
from mldbg.store.s3 import S3Options, S3Store
store = S3Store(sys.argv[1], S3Options(block_seconds=0.2, close_timeout=0))
for i in range(1, 6):
    store.write(f"workers/worker_0/index/{i:010d}.safetensors", [str(i).encode()])
assert store.pending == 5, store.pending
os._exit(0)  # a crash: nothing uploaded, the spill directory stays behind
"""


def test_a_later_process_uploads_what_a_dead_one_spilled(own_s3_server, monkeypatch, tmp_path):
    point_env_at(own_s3_server, monkeypatch, str(tmp_path / "spill"))
    url = f"s3://{BUCKET}/adopt-{uuid.uuid4().hex[:8]}"
    own_s3_server.stop()
    subprocess.run([sys.executable, "-c", SPILL_AND_DIE, url], check=True, timeout=60, env=os.environ)
    own_s3_server.start()
    assert open_store(url).list(IDX) == []
    later = S3Store(url)
    assert later.drain(30)
    assert open_store(url).list(IDX) == [f"{IDX}{i:010d}.safetensors" for i in range(1, 6)]
    later.close()
    assert list((tmp_path / "spill").iterdir()) == []  # nothing left behind


def test_a_stop_request_written_elsewhere_is_seen_within_exists_ttl(s3_url):
    training = S3Store(s3_url, S3Options(exists_ttl=0.3))
    watcher = S3Store(s3_url)
    assert not training.exists("control/stop")
    heads = training.requests["HeadObject"]
    for _ in range(5):  # the training thread polls every 0.1 s: one HEAD per exists_ttl
        assert not training.exists("control/stop")
    assert training.requests["HeadObject"] == heads
    watcher.write("control/stop", [b'{"reason": "test"}'])
    wait_until(lambda: training.exists("control/stop"), 2, "the stop request seen", every=0.05)
    training.write("control/other", [b"1"])
    assert training.exists("control/other")  # its own writes: at once
