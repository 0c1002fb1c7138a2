"""Two layers: an in-memory LRU answers hits without touching the disk; misses go to the
SQLite file (shared, persistent), and its hits are promoted to memory.

Lookups are prefix-aware (typing-through, see ``keys``). Stores happen when a stream
ends: the whole completion, or, for a stream closed early, only its complete lines (the
unit is a line: a half-written line is not a suggestion anyone should see twice). Such
an entry is marked partial; a later stream for the same key replaces it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .keys import CacheKey
from .memory import Entry, MemoryLRU
from .store import SqliteStore

log = logging.getLogger(__name__)


@dataclass
class CacheHit:
    """``text`` is the whole cached completion; ``typed`` how many of its first characters
    the user has typed since (look-back); ``layer`` is ``memory`` or ``sqlite``."""

    text: str
    typed: int
    layer: str
    partial: bool


class CompletionCache:
    """The cache the scheduler asks before going upstream.

    ``path`` None keeps the cache in memory only. Bounds: ``max_entries`` rows and
    ``max_bytes`` bytes on disk, a tenth of both (at least 100 entries) in memory, and
    ``ttl_s`` seconds for both.
    """

    @classmethod
    def from_settings(cls, settings: Any) -> CompletionCache | None:
        """The cache ``settings`` ask for (``cache_*`` settings), or None when it is off."""
        if not settings.cache_enabled:
            return None
        return cls(
            settings.resolved_cache_path,
            max_entries=settings.cache_max_entries,
            max_bytes=settings.cache_max_bytes,
            ttl_s=settings.cache_ttl_s,
        )

    def __init__(self, path: Path | str | None, *, max_entries: int, max_bytes: int, ttl_s: float) -> None:
        path = Path(path) if path is not None else None
        self.path = path
        self.memory = MemoryLRU(max(100, max_entries // 10), max(1 << 20, max_bytes // 10), ttl_s)
        self.store = SqliteStore(path, max_entries=max_entries, max_bytes=max_bytes, ttl_s=ttl_s) if path else None
        self._opening: asyncio.Future[bool] | None = None
        self.closed = False
        self.hits: Counter[str] = Counter()
        self.misses = 0
        self.writes = 0

    async def open(self) -> None:
        """Open the file (once; later calls wait for the first). Never raises; does
        nothing after ``close()``."""
        if self.store is None or (self.closed and self._opening is None):
            return
        if self._opening is None:
            self._opening = asyncio.ensure_future(self.store.open())
        await asyncio.shield(self._opening)

    async def get_state(self, name: str) -> str | None:
        """A small named state kept in the file (``SqliteStore.get_state``); None without one."""
        await self.open()
        return await self.store.get_state(name) if self.store is not None else None

    async def put_state(self, name: str, value: str) -> None:
        """Keep ``value`` as state ``name`` in the file (nothing without persistence)."""
        if self.store is not None:
            await self.store.put_state(name, value)

    async def close(self) -> None:
        """Flush and close the file (bounded; see ``SqliteStore.close``). Idempotent; after
        it, lookups, puts and stats keep working on the memory layer alone."""
        if self.closed:
            return
        self.closed = True
        if self.store is not None:
            await self.store.close()

    async def lookup(self, key: CacheKey) -> CacheHit | None:
        """The entry for ``key`` or for ``key`` minus up to 64 typed characters whose text
        continues with those characters and has more after them; None on a miss."""
        await self.open()
        probes: list[tuple[int, str]] = []
        now = time.time()
        for k in range(key.lookback_limit() + 1):  # digests computed as needed
            d = key.digest(k)
            probes.append((k, d))
            e = self.memory.get(d, now)
            if e is not None and _extends(e.text, key.prefix, k):
                self.hits["memory"] += 1
                return CacheHit(e.text, k, "memory", e.partial)
        typed_of = {d: k for k, d in probes}
        if self.store is not None and self.store.enabled:
            rows = await self.store.get_many([d for _, d in probes])
            for d in sorted(rows, key=lambda d: typed_of[d]):
                e, k = rows[d], typed_of[d]
                if _extends(e.text, key.prefix, k):
                    self.memory.put(d, e)
                    self.hits["sqlite"] += 1
                    return CacheHit(e.text, k, "sqlite", e.partial)
        self.misses += 1
        return None

    def put(self, key: CacheKey, text: str, *, partial: bool) -> bool:
        """Store ``text`` (model text after the key's prefix). For a partial stream only
        whole lines are kept. Returns False when nothing was worth storing."""
        if partial:
            cut = text.rfind("\n")
            if cut <= 0:
                return False
            text = text[:cut]
        if not text.strip():
            return False
        d = key.digest()
        entry = Entry(text=text, created=time.time(), partial=partial)
        self.memory.put(d, entry)
        if self.store is not None:
            self.store.enqueue(d, entry)
        self.writes += 1
        return True

    async def clear(self) -> int:
        """Empty both layers; returns the number of entries removed (the larger count)."""
        await self.open()
        n_mem = self.memory.clear()
        n_disk = await self.store.clear() if self.store is not None else 0
        return max(n_mem, n_disk)

    async def stats(self) -> dict[str, Any]:
        disk = await self.store.stats() if self.store is not None else {"entries": 0, "bytes": 0}
        return {
            "path": str(self.path) if self.path else None,
            "persistent": bool(self.store and self.store.enabled),
            "persistence_off_reason": self.store.disabled_reason if self.store else "memory only",
            "memory": {"entries": len(self.memory), "bytes": self.memory.bytes, "evictions": self.memory.evictions},
            "disk": disk,
            "hits": {"memory": self.hits["memory"], "sqlite": self.hits["sqlite"]},
            "misses": self.misses,
            "writes": self.writes,
        }


def _extends(text: str, prefix: str, typed: int) -> bool:
    """True when the user's last ``typed`` characters begin ``text`` and more follows."""
    if typed == 0:
        return bool(text)
    return len(text) > typed and text.startswith(prefix[len(prefix) - typed :])
