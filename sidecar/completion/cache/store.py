"""The persistent layer of the cache: one SQLite file, shared by every sidecar process.

- WAL journal and a busy timeout, so several processes (one per editor window) read and
  write at once without "database is locked" errors; writes are ``INSERT OR REPLACE`` of
  whole rows, so concurrent writers lose nothing.
- Writes are queued and flushed in one transaction per batch (every ``FLUSH_S`` seconds
  or ``FLUSH_AT`` entries) by a background task: an answer never waits for a write.
- The file and its WAL/SHM companions get mode 0600. Rows hold a SHA-256 key, the
  completion text and timestamps: never an API key or a request header.
- A file that is not a SQLite database, or fails ``PRAGMA quick_check``, is moved aside
  (``<name>.corrupt-<unix time>``) with one log line, and a fresh cache starts.
- A read-only or full disk turns persistence off with one warning; the memory layer
  keeps working.
- The schema is versioned with ``PRAGMA user_version``; a file of another version is
  rebuilt (the cache is only a cache: its rows are dropped, not migrated).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from pathlib import Path

import aiosqlite

from .memory import Entry

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
FLUSH_S = 0.2
FLUSH_AT = 64
BUSY_TIMEOUT_MS = 5000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    partial INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    last_used REAL NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_last_used ON entries(last_used);
"""


class SqliteStore:
    """Persistent rows bounded by ``max_entries``, ``max_bytes`` and ``ttl_s`` seconds.

    Every public method is safe to call when persistence is off (it does nothing).
    """

    def __init__(self, path: Path, *, max_entries: int, max_bytes: int, ttl_s: float) -> None:
        self.path = path
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.ttl_s = ttl_s
        self.enabled = False
        self.disabled_reason: str | None = None
        self._db: aiosqlite.Connection | None = None
        self._pending: dict[str, Entry] = {}
        self._touched: dict[str, float] = {}
        self._flusher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._flushes = 0
        self.write_errors = 0

    # ------------------------------------------------------------------ open/close
    async def open(self) -> bool:
        """Open (or create, or rebuild) the file. Returns False when persistence is off."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self._disable(f"cannot create {self.path.parent}: {exc}")
        for attempt in range(2):
            try:
                await self._connect()
                break
            except sqlite3.DatabaseError as exc:
                await self._close_db()
                if _is_unwritable(exc) or attempt:
                    return self._disable(f"cannot use {self.path}: {exc}")
                self._move_aside(str(exc))
            except OSError as exc:
                await self._close_db()
                return self._disable(f"cannot use {self.path}: {exc}")
        self.enabled = True
        self._flusher = asyncio.ensure_future(self._flush_loop())
        return True

    async def _connect(self) -> None:
        old_umask = os.umask(0o077)
        try:
            self._db = await aiosqlite.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        finally:
            os.umask(old_umask)
        db = self._db
        await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        async with db.execute("PRAGMA quick_check") as cur:
            row = await cur.fetchone()
        if not row or row[0] != "ok":
            raise sqlite3.DatabaseError(f"quick_check failed: {row[0] if row else 'no answer'}")
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = NORMAL")
        async with db.execute("PRAGMA user_version") as cur:
            version = (await cur.fetchone())[0]
        if version != SCHEMA_VERSION:
            if version != 0:
                log.warning("cache schema version %s is not %s: rebuilding %s", version, SCHEMA_VERSION, self.path)
            await db.execute("DROP TABLE IF EXISTS entries")
            await db.executescript(_SCHEMA)
            await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            await db.commit()
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():
                os.chmod(p, 0o600)

    def _move_aside(self, why: str) -> None:
        target = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            os.replace(self.path, target)
            for suffix in ("-wal", "-shm"):
                side = Path(str(self.path) + suffix)
                if side.exists():
                    os.replace(side, Path(str(target) + suffix))
            log.warning("cache file %s is unreadable (%s): moved it to %s and started a fresh cache", self.path, why, target)
        except OSError as exc:
            log.warning("cache file %s is unreadable (%s) and could not be moved: %s", self.path, why, exc)

    def _disable(self, why: str) -> bool:
        self.enabled = False
        if self.disabled_reason is None:
            log.warning("completion cache persistence is off: %s (the in-memory cache still works)", why)
        self.disabled_reason = why
        return False

    async def _close_db(self) -> None:
        if self._db is not None:
            try:
                await self._db.close()
            except Exception:  # noqa: BLE001 - closing a broken handle
                pass
            self._db = None

    async def close(self) -> None:
        """Flush queued rows and close the file. If cancelled mid-way, the worker thread
        is still told to stop, so it never keeps the process alive."""
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        try:
            await self.flush()
            await self._close_db()
        finally:
            self.stop_sync()
            self.enabled = False

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
        if not self.enabled or self._db is None or not keys:
            return {}
        found = {k: e for k, e in self._pending.items() if k in keys}
        marks = ",".join("?" * len(keys))
        try:
            async with self._db.execute(
                f"SELECT key, text, partial, created FROM entries WHERE key IN ({marks}) AND created > ?",
                (*keys, time.time() - self.ttl_s),
            ) as cur:
                rows = await cur.fetchall()
        except sqlite3.DatabaseError as exc:
            await self._on_error(exc)
            return found
        now = time.time()
        for key, text, partial, created in rows:
            found.setdefault(key, Entry(text=text, created=created, partial=bool(partial)))
            self._touched[key] = now
        return found

    async def stats(self) -> dict[str, int]:
        """``{"entries": n, "bytes": n}`` on disk (zeros when off)."""
        if not self.enabled or self._db is None:
            return {"entries": 0, "bytes": 0}
        try:
            async with self._db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries") as cur:
                n, size = await cur.fetchone()
        except sqlite3.DatabaseError as exc:
            await self._on_error(exc)
            return {"entries": 0, "bytes": 0}
        return {"entries": n, "bytes": size}

    # ------------------------------------------------------------------ writes
    def enqueue(self, key: str, entry: Entry) -> None:
        """Queue a row for the next batch; never blocks. Rows queued before the file is
        open are written once it is."""
        if self.disabled_reason is not None:
            return
        self._pending[key] = entry
        if len(self._pending) >= FLUSH_AT:
            self._wake.set()

    async def _flush_loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), FLUSH_S)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Write queued rows and last-used times in one transaction, then keep the bounds."""
        if not self.enabled or self._db is None or not (self._pending or self._touched):
            return
        pending, self._pending = self._pending, {}
        touched, self._touched = self._touched, {}
        now = time.time()
        rows = [(k, e.text, int(e.partial), e.created, now, e.size) for k, e in pending.items()]
        try:
            await self._db.executemany(
                "INSERT OR REPLACE INTO entries(key, text, partial, created, last_used, size) VALUES (?,?,?,?,?,?)",
                rows,
            )
            if touched:
                await self._db.executemany(
                    "UPDATE entries SET last_used = ? WHERE key = ?", [(t, k) for k, t in touched.items()]
                )
            self._flushes += 1
            if self._flushes % 10 == 1:
                await self._enforce_bounds()
            await self._db.commit()
        except sqlite3.DatabaseError as exc:
            await self._on_error(exc)

    async def _enforce_bounds(self) -> None:
        db = self._db
        assert db is not None
        await db.execute("DELETE FROM entries WHERE created <= ?", (time.time() - self.ttl_s,))
        async with db.execute("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries") as cur:
            n, size = await cur.fetchone()
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

    async def clear(self) -> int:
        """Delete every row; returns how many there were."""
        self._pending.clear()
        self._touched.clear()
        if not self.enabled or self._db is None:
            return 0
        try:
            async with self._db.execute("SELECT COUNT(*) FROM entries") as cur:
                n = (await cur.fetchone())[0]
            await self._db.execute("DELETE FROM entries")
            await self._db.commit()
        except sqlite3.DatabaseError as exc:
            await self._on_error(exc)
            return 0
        return n

    async def _on_error(self, exc: sqlite3.DatabaseError) -> None:
        self.write_errors += 1
        if _is_unwritable(exc):
            await self._close_db()
            self._disable(str(exc))
            return
        if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
            log.warning("cache busy for more than %d ms; a batch was skipped", BUSY_TIMEOUT_MS)
            return
        # The file went bad under us: move it aside and start again.
        await self._close_db()
        self._move_aside(str(exc))
        try:
            await self._connect()
        except (sqlite3.DatabaseError, OSError) as exc2:
            await self._close_db()
            self._disable(f"cannot recreate {self.path}: {exc2}")


def _is_unwritable(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return any(s in msg for s in ("readonly", "read-only", "disk is full", "disk full", "unable to open", "disk i/o"))
