"""The in-memory front of the cache: an LRU bounded by entries, bytes and age."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass


@dataclass
class Entry:
    """A cached completion. ``created`` is wall-clock seconds (``time.time()``);
    ``partial`` marks text from a stream closed early (whole lines only)."""

    text: str
    created: float
    partial: bool = False

    @property
    def size(self) -> int:
        """Approximate bytes held: the UTF-8 text plus a fixed overhead per entry."""
        return len(self.text.encode("utf-8", "surrogatepass")) + 160


class MemoryLRU:
    """``max_entries`` entries, ``max_bytes`` bytes (``Entry.size``), ``ttl_s`` seconds."""

    def __init__(self, max_entries: int, max_bytes: int, ttl_s: float) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self._d: OrderedDict[str, Entry] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._d)

    def get(self, key: str, now: float | None = None) -> Entry | None:
        e = self._d.get(key)
        if e is None:
            return None
        if (now or time.time()) - e.created > self.ttl_s:
            self._remove(key)
            return None
        self._d.move_to_end(key)
        return e

    def put(self, key: str, entry: Entry) -> None:
        if key in self._d:
            self._remove(key)
        self._d[key] = entry
        self.bytes += entry.size
        while self._d and (len(self._d) > self.max_entries or self.bytes > self.max_bytes):
            old, _ = next(iter(self._d.items()))
            self._remove(old)
            self.evictions += 1

    def _remove(self, key: str) -> None:
        e = self._d.pop(key)
        self.bytes -= e.size

    def clear(self) -> int:
        n = len(self._d)
        self._d.clear()
        self.bytes = 0
        return n
