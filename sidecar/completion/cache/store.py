"""The persistent layer of the cache: one SQLite file, shared by every sidecar process
(docs/architecture.md, "The path of a keystroke", step 3).

:class:`SqliteStore` is made of three parts, one module each:

- ``connection.py``: the schema, the checks on every connection (WAL, busy timeout, mode
  0600, quick_check, schema version) and the signs of a corrupt file;
- ``flusher.py``: queued writes, flushed in batches by a background task, and the
  bounds (rows, bytes, TTL);
- ``recovery.py``: a corrupt file moved aside, a deleted one recreated, a read-only or
  full disk turning persistence off.

This module holds the store's state, its reads and its lifecycle:

- Lifecycle: ``close()`` flushes, closes and stops the worker thread within ``CLOSE_S``
  seconds, once (later calls return at once). After it every method is a harmless no-op
  and nothing reconnects; a connection that an open or reopen made while closing is closed
  again, so no worker thread outlives the store. Reconnects happen only in the flush task,
  which ``close()`` waits for.
- A failed read returns what the queue holds (or zeros) and goes to the recovery policy.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path

from .connection import _Connection
from .flusher import _Flusher
from .memory import Entry
from .recovery import _Recovery

__all__ = ["SqliteStore"]

log = logging.getLogger(__name__)

CLOSE_S = 3.0  # the most close() waits for the last batch and the worker thread


class SqliteStore(_Connection, _Flusher, _Recovery):
    """Persistent rows bounded by ``max_entries``, ``max_bytes`` and ``ttl_s`` seconds.

    Every public method is safe to call when persistence is off or after ``close()`` (it
    does nothing).
    """

    def __init__(self, path: Path, *, max_entries: int, max_bytes: int, ttl_s: float) -> None:
        self.path = path
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        # The types of these attributes are declared once, on ``connection._StoreState``.
        self.enabled = False
        self.disabled_reason = None
        self.closed = False
        self._db = None
        self._ident = None  # (st_dev, st_ino) of the file we opened
        self._pending = {}
        self._touched = {}
        self._flusher = None
        self._opening = None
        self._reopen_why = None  # corruption seen by a query: the flush task moves it aside
        self._reopen_fresh = False  # the file was deleted or replaced: the flush task recreates it
        self._wake = asyncio.Event()
        self._flushes = 0
        self._warned = set()
        self.write_errors = 0
        self.reopens = 0

    async def close(self) -> None:
        """Flush queued rows and close the file, within ``CLOSE_S`` seconds. Idempotent:
        later calls return at once. If cancelled or out of time, the worker thread is
        still told to stop, so it never keeps the process alive."""
        if self.closed:
            return
        self.closed = True
        self._wake.set()
        try:
            await asyncio.wait_for(self._shutdown(), CLOSE_S)
        except TimeoutError:
            log.warning("closing the cache file %s took more than %g s; the last rows may be lost", self.path, CLOSE_S)
        finally:
            if self._flusher is not None:
                self._flusher.cancel()
                self._flusher = None
            self.stop_sync()
            self.enabled = False

    async def _shutdown(self) -> None:
        if self._opening is not None and not self._opening.done():
            await asyncio.shield(self._opening)  # it sees ``closed`` and closes its connection
        flusher = self._flusher
        if flusher is not None:
            await asyncio.wait({flusher})  # it ends after the batch it is writing
        if self.enabled:
            await self._flush_now()
        await self._close_db()

    def stop_sync(self) -> None:
        """Stop aiosqlite's worker thread without awaiting (for exit paths)."""
        db, self._db = self._db, None
        if db is not None:
            try:
                db.stop()
            except Exception:  # noqa: BLE001 - the loop may already be gone
                pass

    # ------------------------------------------------------------------ reads
    async def get_many(self, keys: list[str]) -> dict[str, Entry]:
        """Rows for ``keys`` that exist and are younger than the TTL."""
        db = self._db
        if not self.enabled or self.closed or db is None or not keys:
            return {}
        found = {k: e for k, e in self._pending.items() if k in keys}
        marks = ",".join("?" * len(keys))
        try:
            async with db.execute(
                f"SELECT key, text, partial, created FROM entries WHERE key IN ({marks}) AND created > ?",
                (*keys, time.time() - self.ttl_s),
            ) as cur:
                rows = await cur.fetchall()
        except (sqlite3.Error, ValueError) as exc:
            await self._on_error(exc, db)
            return found
        now = time.time()
        for key, text, partial, created in rows:
            found.setdefault(key, Entry(text=text, created=created, partial=bool(partial)))
            self._touched[key] = now
        return found

    async def stats(self) -> dict[str, int]:
        """``{"entries": n, "bytes": n}`` on disk (zeros when off or closed)."""
        db = self._db
        if not self.enabled or self.closed or db is None:
            return {"entries": 0, "bytes": 0}
        try:
            async with db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries") as cur:
                row = await cur.fetchone()
            assert row is not None  # an aggregate without GROUP BY always answers one row
            n, size = row
        except (sqlite3.Error, ValueError) as exc:
            await self._on_error(exc, db)
            return {"entries": 0, "bytes": 0}
        return {"entries": n, "bytes": size}

    async def get_state(self, name: str) -> str | None:
        """The stored state ``name`` (None: none, or persistence is off)."""
        db = self._db
        if not self.enabled or self.closed or db is None:
            return None
        try:
            async with db.execute("SELECT value FROM state WHERE name = ?", (name,)) as cur:
                row = await cur.fetchone()
        except (sqlite3.Error, ValueError) as exc:
            await self._on_error(exc, db)
            return None
        return row[0] if row else None

    async def put_state(self, name: str, value: str) -> None:
        """Store ``value`` as state ``name`` (nothing when persistence is off)."""
        db = self._db
        if not self.enabled or self.closed or db is None:
            return
        try:
            await db.execute(
                "INSERT OR REPLACE INTO state (name, value, updated) VALUES (?, ?, ?)", (name, value, time.time())
            )
            await db.commit()
        except (sqlite3.Error, ValueError) as exc:
            await self._on_error(exc, db)

    async def clear(self) -> int:
        """Delete every row (and the stored states); returns how many entries there were."""
        self._pending.clear()
        self._touched.clear()
        db = self._db
        if not self.enabled or self.closed or db is None:
            return 0
        try:
            async with db.execute("SELECT COUNT(*) FROM entries") as cur:
                row = await cur.fetchone()
            assert row is not None  # an aggregate without GROUP BY always answers one row
            n = row[0]
            await db.execute("DELETE FROM entries")
            await db.execute("DELETE FROM state")
            await db.commit()
        except (sqlite3.Error, ValueError) as exc:
            await self._on_error(exc, db)
            return 0
        return n
