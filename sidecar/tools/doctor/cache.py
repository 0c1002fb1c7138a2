"""The ``cache`` check: the SQLite cache file: its size (bytes, KiB or MiB), its mode, a
read-only ``PRAGMA quick_check`` and schema version (doctor never moves a corrupt file
aside itself), then the number of entries as the sidecar opens it.

INFO: the cache is off. WARN: the file cannot be opened, is corrupt (moved aside on the
next start), has another schema version (rebuilt on the next start), is not writable (the
cache stays in memory), or other users could read it (mode not 0600). It never FAILs: the
sidecar works without a cache. See docs/architecture.md (``completion/``, ``tools/``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from typing import Any

from .base import INFO, OK, WARN, _CheckMixin, _size


class CacheCheck(_CheckMixin):
    """``check_cache``, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def check_cache(self) -> None:
        from ...completion.cache.connection import SCHEMA_VERSION

        s = self.settings
        assert s is not None
        if not s.cache_enabled:
            self.add("cache", "cache", INFO, "the cache is off (cache_enabled = false)", "", {"enabled": False})
            return
        path = s.resolved_cache_path
        data: dict[str, Any] = {"path": str(path), "exists": path.exists()}
        if not path.exists():
            self.add("cache", "cache", OK, f"{path}: not created yet (the sidecar creates it on first start)", "", data)
            return
        st = path.stat()
        mode = stat.S_IMODE(st.st_mode)
        data.update(bytes=st.st_size, mode=f"{mode:04o}")
        head = f"{path}: {_size(st.st_size)}, mode {mode:04o}"
        # Read-only first: a corrupt file must not be moved aside by doctor itself.
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                row = db.execute("PRAGMA quick_check").fetchone()
                if not row or row[0] != "ok":
                    raise sqlite3.DatabaseError(f"quick_check: {row[0] if row else 'no answer'}")
                version = db.execute("PRAGMA user_version").fetchone()[0]
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            data["error"] = str(exc)
            if "unable to open" in str(exc).lower() or "readonly" in str(exc).lower():
                self.add(
                    "cache",
                    "cache",
                    WARN,
                    f"{head}; cannot open it: {exc}",
                    f"Check the permissions of {path} and its folder; until then the cache stays in memory.",
                    data,
                )
            else:
                self.add(
                    "cache",
                    "cache",
                    WARN,
                    f"{head}; corrupt ({exc})",
                    "The file is corrupt and will be moved aside on next start (a fresh cache starts then).",
                    data,
                )
            return
        data["schema_version"] = version
        if version not in (0, SCHEMA_VERSION):
            self.add(
                "cache",
                "cache",
                WARN,
                f"{head}; schema version {version}, expected {SCHEMA_VERSION}",
                "The cache will be rebuilt (emptied) on next start; nothing to do.",
                data,
            )
            return
        from ...completion.cache import CompletionCache

        cache = CompletionCache(path, max_entries=s.cache_max_entries, max_bytes=s.cache_max_bytes, ttl_s=s.cache_ttl_s)
        try:
            await asyncio.wait_for(cache.open(), self.timeout_s)
            stats = await cache.stats()
        finally:
            await cache.close()
        n = stats["disk"]["entries"]
        data.update(entries=n, persistent=stats["persistent"])
        value = f"{head}; quick_check ok, {n} {'entry' if n == 1 else 'entries'}"
        if not stats["persistent"]:
            self.add(
                "cache",
                "cache",
                WARN,
                value + f"; not writable ({stats['persistence_off_reason']})",
                f"Make {path} and its folder writable, or set cache_path elsewhere; until then the cache "
                f"stays in memory.",
                data,
            )
        elif mode & 0o077:
            now = stat.S_IMODE(path.stat().st_mode) if path.exists() else mode
            data["mode_after"] = f"{now:04o}"
            done = (
                f"opening it just reset the mode to {now:04o}, as the sidecar does"
                if not now & 0o077
                else f"run chmod 600 {path}"
            )
            self.add(
                "cache",
                "cache",
                WARN,
                value,
                f"Other users could read the cached completions ({done}); if it happens again, check "
                f"what else writes {path}.",
                data,
            )
        else:
            self.add("cache", "cache", OK, value, "", data)
