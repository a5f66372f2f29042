"""A bounded in-memory cache of object blocks, for stores where each read is a request."""

from __future__ import annotations

import collections
import threading


class BlockCache:
    """An LRU of object blocks bounded by `max_bytes`. Callers put only objects that never
    change (or invalidate a key when they rewrite it)."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._blocks: collections.OrderedDict[tuple[str, int], bytes] = collections.OrderedDict()
        self._by_key: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, block: int, count: bool = True) -> bytes | None:
        with self._lock:
            data = self._blocks.get((key, block))
            if data is None:
                self.misses += count
                return None
            self.hits += count
            self._blocks.move_to_end((key, block))
            return data

    def put(self, key: str, block: int, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._blocks.pop((key, block), None)
            if old is not None:
                self.bytes -= len(old)
            self._blocks[(key, block)] = data
            self._by_key.setdefault(key, set()).add(block)
            self.bytes += len(data)
            while self.bytes > self.max_bytes:
                (k, b), dropped = self._blocks.popitem(last=False)
                self.bytes -= len(dropped)
                blocks = self._by_key[k]
                blocks.discard(b)
                if not blocks:
                    del self._by_key[k]

    def invalidate(self, key: str) -> None:
        with self._lock:
            for b in self._by_key.pop(key, ()):
                self.bytes -= len(self._blocks.pop((key, b)))
