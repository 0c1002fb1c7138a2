"""The SQLite store's writes: queued, and flushed in batches by one background task.
Part of the SQLite store (``store.py``; docs/architecture.md, "The path of a keystroke",
step 3).

- Writes are queued and flushed in one transaction per batch (every ``FLUSH_S`` seconds
  or ``FLUSH_AT`` entries) by a background task: an answer never waits for a write.
- Writes are ``INSERT OR REPLACE`` of whole rows, so concurrent writers (other sidecar
  processes) lose nothing; last-used times of rows read go in the same transaction.
- One batch in ten (the first, the eleventh, ...) keeps the bounds: rows older than
  ``ttl_s`` seconds go, then the least recently used until at most ``max_entries`` rows
  and about ``max_bytes`` bytes (estimated from the mean row size) are left.
- The flush task also checks, once per batch, that the path still names the file it
  opened, and makes every reconnect (``recovery.py``).
- ``flush_sync`` writes what is queued with a blocking connection, for exit paths.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from typing import TYPE_CHECKING

import aiosqlite

from .connection import BUSY_TIMEOUT_MS, _StoreState
from .memory import Entry

log = logging.getLogger(__name__)

FLUSH_S = 0.2
FLUSH_AT = 64


class _Flusher(_StoreState):
    """The write queue and its flush task (a part of :class:`~.store.SqliteStore`: it uses
    the store's state)."""

    if TYPE_CHECKING:  # defined by the other parts of the store

        def _file_replaced(self) -> bool: ...
        async def _reopen(self, *, move_aside: str | None) -> None: ...
        async def _on_error(self, exc: Exception, db: aiosqlite.Connection | None) -> None: ...

    def enqueue(self, key: str, entry: Entry) -> None:
        """Queue a row for the next batch; never blocks. Rows queued before the file is
        open are written once it is (after close, only by ``flush_sync`` at exit)."""
        if self.disabled_reason is not None:
            return
        self._pending[key] = entry
        if len(self._pending) >= FLUSH_AT:
            self._wake.set()

    async def _flush_loop(self) -> None:
        """The background task: batches, the check that the file is still ours, and every
        reconnect (so that ``close()``, which waits for this task, leaves none behind)."""
        while not self.closed:
            try:
                await asyncio.wait_for(self._wake.wait(), FLUSH_S)
            except TimeoutError:
                pass
            self._wake.clear()
            if self.closed:
                return
            try:
                if self._reopen_why is not None:
                    why, self._reopen_why = self._reopen_why, None
                    await self._reopen(move_aside=why)
                elif self._reopen_fresh or self._file_replaced():  # one stat() per batch
                    self._reopen_fresh = False
                    log.warning("cache file %s was deleted or replaced while in use: recreating it", self.path)
                    await self._reopen(move_aside=None)
                if not self.closed:
                    await self._flush_now()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the loop must outlive any one batch
                log.debug("cache flush failed", exc_info=True)

    async def flush(self) -> None:
        """Write queued rows and last-used times in one transaction, then keep the bounds."""
        if self.closed:
            return
        await self._flush_now()

    async def _flush_now(self) -> None:
        db = self._db
        if not self.enabled or db is None or not (self._pending or self._touched):
            return
        if self._file_replaced():
            # SQLite would write these rows into the deleted file: keep them for the new one.
            if not self.closed:
                self._reopen_fresh = True
                self._wake.set()
            return
        pending, self._pending = self._pending, {}
        touched, self._touched = self._touched, {}
        now = time.time()
        rows = [(k, e.text, int(e.partial), e.created, now, e.size) for k, e in pending.items()]
        try:
            await db.executemany(
                "INSERT OR REPLACE INTO entries(key, text, partial, created, last_used, size) VALUES (?,?,?,?,?,?)",
                rows,
            )
            if touched:
                await db.executemany(
                    "UPDATE entries SET last_used = ? WHERE key = ?", [(t, k) for k, t in touched.items()]
                )
            self._flushes += 1
            if self._flushes % 10 == 1:
                await self._enforce_bounds(db)
            await db.commit()
        except (sqlite3.Error, ValueError) as exc:
            if not self.closed and (db is not self._db or self._file_replaced()):
                # The file or the connection was replaced meanwhile: the rows belong in the new file.
                self._pending = {**pending, **self._pending}
            await self._on_error(exc, db)

    async def _enforce_bounds(self, db: aiosqlite.Connection | None = None) -> None:
        db = db or self._db
        assert db is not None
        await db.execute("DELETE FROM entries WHERE created <= ?", (time.time() - self.ttl_s,))
        async with db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries") as cur:
            row = await cur.fetchone()
        assert row is not None  # an aggregate without GROUP BY always answers one row
        n, size = row
        if n > self.max_entries:
            await db.execute(
                "DELETE FROM entries WHERE key IN (SELECT key FROM entries ORDER BY last_used ASC LIMIT ?)",
                (n - self.max_entries,),
            )
            n = self.max_entries
        if size > self.max_bytes and n:
            # Drop the least recently used rows until the total fits (estimated by the mean size).
            excess = size - self.max_bytes
            mean = max(1, size // max(1, n))
            await db.execute(
                "DELETE FROM entries WHERE key IN (SELECT key FROM entries ORDER BY last_used ASC LIMIT ?)",
                (excess // mean + 1,),
            )

    def flush_sync(self) -> None:
        """Write queued rows with a plain blocking connection (for exit paths, after the
        event loop is gone). Errors are logged, never raised."""
        if not self._pending or self.disabled_reason is not None:
            return
        pending, self._pending = self._pending, {}
        now = time.time()
        try:
            con = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
            try:
                con.executemany(
                    "INSERT OR REPLACE INTO entries(key, text, partial, created, last_used, size) VALUES (?,?,?,?,?,?)",
                    [(k, e.text, int(e.partial), e.created, now, e.size) for k, e in pending.items()],
                )
                con.commit()
            finally:
                con.close()
        except sqlite3.Error as exc:
            log.warning("could not write %d cache rows at exit: %s", len(pending), exc)
