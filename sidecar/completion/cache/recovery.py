"""What the SQLite store does when its file goes bad, disappears or cannot be written.
Part of the SQLite store (``store.py``; docs/architecture.md, "The path of a keystroke",
step 3).

- A cache file that SQLite calls corrupt (not a database, malformed, a failed
  ``PRAGMA quick_check``) is moved aside (``<name>.corrupt-<unix time>``, with its WAL/SHM
  companions) with one log line, and a fresh cache starts. Only the signs in
  ``connection._is_corrupt`` count; a file is never moved after ``close()``.
- Only a file that can be a cache is ever moved: an empty one, or one that starts with
  SQLite's header (``SQLite format 3\0``). Any other file at ``cache_path`` (the
  config.toml, notes) is someone else's: it is left untouched, byte for byte, and
  persistence is off with one warning that names it and says to point ``cache_path``
  at a new file.
- A cache file deleted or replaced while the sidecar runs (its path gone, or another
  inode) is noticed by the flush task within ``FLUSH_S`` seconds, or by the write that
  SQLite then refuses (``SQLITE_READONLY_DBMOVED``), and recreated: queued rows go to the
  new file, and persistence is not turned off for it.
- A read-only or full disk turns persistence off with one warning; the memory layer
  keeps working.
- Reconnects happen only in the flush task (``flusher.py``), which ``close()`` waits for;
  a busy file skips a batch; any other query error is logged once per kind and the file
  is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

import aiosqlite

from .connection import BUSY_TIMEOUT_MS, _Closed, _is_corrupt, _is_unwritable, _StoreState

log = logging.getLogger(__name__)

#: The first 16 bytes of every SQLite database file (sqlite.org/fileformat.html, 1.3.1).
SQLITE_HEADER = b"SQLite format 3\x00"


def may_be_cache(path: Path) -> bool:
    """True when the file at ``path`` can be a cache file: missing, empty, or starting
    with SQLite's header. False for any other file (or one that cannot be read)."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return head == b"" or head == SQLITE_HEADER


class _Recovery(_StoreState):
    """Moving a corrupt file aside, recreating a deleted one, turning persistence off (a
    part of :class:`~.store.SqliteStore`: it uses the store's state)."""

    if TYPE_CHECKING:  # defined by the other parts of the store

        def stop_sync(self) -> None: ...
        async def _connect(self) -> None: ...
        async def _close_db(self) -> None: ...

    def _move_aside(self, why: str) -> bool:
        """Move the corrupt file aside. Returns False, with persistence off and the file
        untouched, when the file is not one a cache could have written (``may_be_cache``)."""
        if self.closed:  # never after close: whatever failed, it was not the file
            return True
        if not may_be_cache(self.path):
            return self._disable(
                f"{self.path} is not a completion cache file (it does not start with SQLite's header), so it "
                f"was left untouched; set cache_path (SIDECAR_CACHE_PATH) to a new file"
            )
        target = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            os.replace(self.path, target)
            for suffix in ("-wal", "-shm"):
                side = Path(str(self.path) + suffix)
                if side.exists():
                    os.replace(side, Path(str(target) + suffix))
            log.warning(
                "cache file %s is unreadable (%s): moved it to %s and started a fresh cache", self.path, why, target
            )
        except OSError as exc:
            log.warning("cache file %s is unreadable (%s) and could not be moved: %s", self.path, why, exc)
        return True

    def _disable(self, why: str) -> bool:
        self.enabled = False
        if self.disabled_reason is None:
            log.warning("completion cache persistence is off: %s (the in-memory cache still works)", why)
        self.disabled_reason = why
        return False

    def _file_replaced(self) -> bool:
        """True when the path no longer names the file we opened (deleted, or replaced by
        another file, e.g. moved aside by another sidecar)."""
        if self._ident is None or self._db is None:
            return False
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return (st.st_dev, st.st_ino) != self._ident

    async def _reopen(self, *, move_aside: str | None) -> None:
        """Close the connection, move the file aside if it is corrupt, and connect again
        (creating the file). Only the flush task calls this."""
        await self._close_db()
        if self.closed:
            return
        if move_aside is not None:
            if not self._move_aside(move_aside):
                return  # not a cache file (replaced under us): left alone, persistence off
        elif not self.path.exists():
            # Companions of a deleted file would be replayed into the new one.
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.remove(str(self.path) + suffix)
            with contextlib.suppress(OSError):  # the whole folder may have gone
                self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            await self._connect()
            self.reopens += 1
        except asyncio.CancelledError:
            self.stop_sync()
            raise
        except _Closed:
            pass
        except (sqlite3.Error, OSError, ValueError) as exc:
            if not self.closed:
                self._disable(f"cannot recreate {self.path}: {exc}")

    async def _on_error(self, exc: Exception, db: aiosqlite.Connection | None) -> None:
        """A query on ``db`` failed. Only real corruption moves the file aside (in the
        flush task); an error after close or on a connection since replaced is not the
        file's fault and is ignored."""
        if self.closed or db is not self._db or db is None:
            log.debug("cache query on a closed connection ignored: %s", exc)
            return
        self.write_errors += 1
        if self._file_replaced():  # e.g. "attempt to write a readonly database" once it was deleted
            self._reopen_fresh = True
            self._wake.set()
            return
        if isinstance(exc, sqlite3.Error) and _is_unwritable(exc):
            await self._close_db()
            self._disable(str(exc))
            return
        msg = str(exc).lower()
        if isinstance(exc, sqlite3.OperationalError) and ("locked" in msg or "busy" in msg):
            log.warning("cache busy for more than %d ms; a batch was skipped", BUSY_TIMEOUT_MS)
            return
        if _is_corrupt(exc):
            # The file went bad under us: the flush task moves it aside and starts again.
            self._reopen_why = str(exc)
            self._wake.set()
            return
        kind = type(exc).__name__
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("cache query failed (%s: %s); the file is kept", kind, exc)
        else:
            log.debug("cache query failed: %s", exc)
