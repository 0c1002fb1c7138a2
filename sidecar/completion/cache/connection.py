"""Opening the cache's SQLite file: its schema, the checks every new connection makes,
and which errors are signs of a corrupt file. Part of the SQLite store (``store.py``;
docs/architecture.md, "The path of a keystroke", step 3).

- WAL journal and a busy timeout (``BUSY_TIMEOUT_MS``, milliseconds), so several
  processes (one per editor window) read and write at once without "database is locked"
  errors; an open that finds the file busy (another sidecar creating or migrating it)
  waits and tries again, up to 10 times.
- The file and its WAL/SHM companions get mode 0600. Rows hold a SHA-256 key, the
  completion text and timestamps: never an API key or a request header.
- Every connection runs ``PRAGMA quick_check``; a failed check raises
  ``sqlite3.DatabaseError``, like a file that is not a database.
- The schema is versioned with ``PRAGMA user_version``; a file of another version is
  rebuilt (the cache is only a cache: its rows are dropped, not migrated).
- Only these signs count as corruption (:func:`_is_corrupt`): ``file is not a database``,
  ``malformed``, a failed quick_check. An error on a closed or replaced connection, a busy
  or locked file, or a misuse error never moves a file (``recovery.py`` moves a corrupt
  one aside, and only one that starts with SQLite's header or is empty: any other file
  at the path is left untouched and persistence is off).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite

from .memory import Entry

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
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
#: Small named states kept with the cache (the confidence gate's model, completion/gate.py).
#: Created on every connection, so a file of the same schema version gains it.
_STATE_TABLE = "CREATE TABLE IF NOT EXISTS state (name TEXT PRIMARY KEY, value TEXT NOT NULL, updated REAL NOT NULL)"


class _Closed(Exception):
    """The store was closed while a connection was being made."""


class _StoreState:
    """The state of :class:`~.store.SqliteStore` that its parts (``_Connection``,
    ``_Flusher``, ``_Recovery``) share, declared once for the type checker; the store's
    ``__init__`` sets every attribute."""

    path: Path
    max_entries: int
    max_bytes: int
    ttl_s: float
    enabled: bool
    disabled_reason: str | None
    closed: bool
    _db: aiosqlite.Connection | None
    _ident: tuple[int, int] | None  # (st_dev, st_ino) of the file we opened
    _pending: dict[str, Entry]
    _touched: dict[str, float]
    _flusher: asyncio.Task[None] | None
    _opening: asyncio.Future[None] | None
    _reopen_why: str | None  # corruption seen by a query: the flush task moves it aside
    _reopen_fresh: bool  # the file was deleted or replaced: the flush task recreates it
    _wake: asyncio.Event
    _flushes: int
    _warned: set[str]
    write_errors: int
    reopens: int


class _Connection(_StoreState):
    """Opening and closing :class:`~.store.SqliteStore`'s connection (a part of the store:
    it uses the store's state)."""

    if TYPE_CHECKING:  # defined by the other parts of the store

        def stop_sync(self) -> None: ...
        def _disable(self, why: str) -> bool: ...
        def _move_aside(self, why: str) -> bool: ...
        async def _flush_loop(self) -> None: ...

    async def open(self) -> bool:
        """Open (or create, or rebuild) the file. Returns False when persistence is off
        or the store is closed. Never raises."""
        if self.closed:
            return False
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._opening = done
        try:
            return await self._open()
        finally:
            if not done.done():
                done.set_result(None)

    async def _open(self) -> bool:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return self._disable(f"cannot create {self.path.parent}: {exc}")
        moved = False
        for attempt in range(10):
            try:
                await self._connect()
                break
            except asyncio.CancelledError:
                self.stop_sync()
                raise
            except _Closed:
                return False
            except (sqlite3.Error, OSError, ValueError) as exc:
                if self.closed:  # closed under us: not the file's fault
                    return False
                if _is_busy(exc) and attempt < 9:
                    # Another sidecar is creating or migrating the same file: wait for it.
                    await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
                    continue
                if not moved and _is_corrupt(exc):
                    moved = True
                    if not self._move_aside(str(exc)):
                        return False  # not a cache file: left untouched, persistence off
                    continue
                return self._disable(f"cannot use {self.path}: {exc}")
        if self.closed:
            await self._close_db()
            return False
        self.enabled = True
        self._flusher = asyncio.ensure_future(self._flush_loop())
        return True

    async def _connect(self) -> None:
        """Connect, check, migrate and protect the file, and only then make the
        connection ``self._db``: until the schema is there, readers and writers see no
        connection (a miss), never a file without its table. Raises _Closed when the
        store was closed meanwhile; on any failure the new connection is closed here."""
        if self.closed:
            raise _Closed()
        old_umask = os.umask(0o077)
        try:
            db = await aiosqlite.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000)
        finally:
            os.umask(old_umask)
        try:
            if self.closed:
                raise _Closed()
            ident = await self._prepare(db)
            if self.closed:
                raise _Closed()
        except asyncio.CancelledError:
            db.stop()
            raise
        except BaseException:
            try:
                await db.close()
            except Exception:  # noqa: BLE001 - closing a broken handle
                db.stop()
            raise
        self._db, self._ident = db, ident

    async def _prepare(self, db: aiosqlite.Connection) -> tuple[int, int]:
        """Check, migrate and protect the file behind ``db``; returns its (device, inode)."""
        await db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        async with db.execute("PRAGMA quick_check") as cur:
            row = await cur.fetchone()
        if not row or row[0] != "ok":
            raise sqlite3.DatabaseError(f"quick_check failed: {row[0] if row else 'no answer'}")
        await db.execute("PRAGMA journal_mode = WAL")
        await db.execute("PRAGMA synchronous = NORMAL")
        async with db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        assert row is not None  # PRAGMA user_version always answers one row
        version = row[0]
        if version != SCHEMA_VERSION:
            # Under a write lock, and checked again: another process may have just done it.
            await db.execute("BEGIN IMMEDIATE")
            async with db.execute("PRAGMA user_version") as cur:
                row = await cur.fetchone()
            assert row is not None  # PRAGMA user_version always answers one row
            version = row[0]
            if version != SCHEMA_VERSION:
                if version != 0:
                    log.warning("cache schema version %s is not %s: rebuilding %s", version, SCHEMA_VERSION, self.path)
                await db.execute("DROP TABLE IF EXISTS entries")
                await db.execute("DROP TABLE IF EXISTS state")
                for statement in (x.strip() for x in _SCHEMA.split(";")):
                    if statement:
                        await db.execute(statement)
                await db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            await db.commit()
        await db.execute(_STATE_TABLE)
        await db.commit()
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(self.path) + suffix)
            if p.exists():  # noqa: ASYNC240 - local files, once at open
                os.chmod(p, 0o600)
        st = os.stat(self.path)
        return (st.st_dev, st.st_ino)

    async def _close_db(self) -> None:
        """Close the current connection (once: it is detached before the await, so a
        second caller never closes it again or waits on a stopped worker)."""
        db, self._db = self._db, None
        self._ident = None
        if db is not None:
            try:
                await db.close()
            except asyncio.CancelledError:
                db.stop()
                raise
            except Exception:  # noqa: BLE001 - closing a broken handle
                db.stop()


def _is_busy(exc: BaseException) -> bool:
    """SQLite's "database is locked" / "busy": another connection holds the lock."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _is_corrupt(exc: BaseException) -> bool:
    """Signs that the file itself is bad: not a database, malformed, or a failed
    quick_check. Misuse errors (a closed connection) and busy files are not."""
    if not isinstance(exc, sqlite3.DatabaseError) or isinstance(
        exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError)
    ):
        return False
    msg = str(exc).lower()
    return any(s in msg for s in ("file is not a database", "malformed", "quick_check failed", "file is encrypted"))


def _is_unwritable(exc: BaseException) -> bool:
    msg = str(exc).lower()
    return any(s in msg for s in ("readonly", "read-only", "disk is full", "disk full", "unable to open", "disk i/o"))
