"""The workspace index: what every source file of the workspace folders defines and
imports, and which of their chunks look like the code at the cursor (:class:`WorkspaceIndex`).

**Built in the background.** One daemon thread (``sidecar-index``) does all the work:
it lists the folders the client sent (``initialize``'s ``workspaceFolders``, else its
root; ``workspace/didChangeWorkspaceFolders``) with ``walk.py`` (``.gitignore``,
vendored, generated, binary and huge files skipped), then parses each listed file
(``parse.py``: tree-sitter definitions and imports) and adds its identifier chunks to
the BM25 index (``retrieve.py``). Files a request asked for (:meth:`want`: the files the
current document imports) are parsed before the rest. While the server is busy with a
request (``busy()``) the thread pauses ``BUSY_PAUSE_S`` between files, so a request is
never slower because the index is building; requests use what is indexed so far.

**Kept current.** :meth:`changed` queues a file: with its text (``didOpen``/``didChange``
of an open document: applied after ``TYPING_QUIET_S`` of quiet, so typing does not
re-parse every keystroke) or without (``didSave``, ``didClose``,
``workspace/didChangeWatchedFiles`` created/changed: read from disk at once);
:meth:`deleted` drops one. Changes are handled before the build's remaining files.

**Stable for the prompt.** ``epoch`` counts the moments the index's answers may have
changed for reasons the caller cannot see (the listing done, a wanted file parsed, the
build done, a file changed on disk). ``select.py`` makes it part of the snippet block's
key, so the block does not change with every file the build adds.

Thread safety: every public method takes the index's lock, briefly (parsing happens
outside it). Nothing is raised to callers: unreadable files and folders, a folder that
disappears, a symlink loop, a huge or binary file are logged once and skipped. See
docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .index import identifiers_of
from .languages import language_of
from .parse import Definition, Facts, Import, facts
from .resolve import ModuleMap
from .retrieve import ChunkIndex
from .walk import MAX_FILES, SKIP_DIRS, _gitignore, _ignored, skip_reason, text_skip_reason, walk

log = logging.getLogger(__name__)

BUSY_PAUSE_S = 0.02
TYPING_QUIET_S = 0.15
MAX_SKIP_LOGS = 20  # skipped files logged one by one; the rest only counted
_LINES_CACHE = 64  # files whose lines are kept for snippets


@dataclass(frozen=True)
class Entry:
    """One indexed file: its number, absolute ``path``, ``rel`` path inside its
    workspace ``folder``, index language and what it defines and imports."""

    no: int
    path: str
    rel: str
    folder: str
    language: str
    facts: Facts
    stamp: tuple[Any, ...]


_DELETE = object()


class WorkspaceIndex:
    """See the module doc. ``busy()`` says whether a request is in flight;
    ``open_text(path)`` returns an open document's text (``None`` when it is not open)."""

    def __init__(
        self,
        busy: Callable[[], bool] = lambda: False,
        open_text: Callable[[str], str | None] = lambda path: None,
        excluded: Callable[[str], str | None] = lambda path: None,
    ) -> None:
        self._busy = busy
        self._excluded = excluded
        self._open_text = open_text
        self._lock = threading.Condition(threading.RLock())
        self._folders: list[str] = []
        self._entries: dict[str, Entry] = {}
        self._by_no: dict[int, Entry] = {}
        self._names: dict[str, list[int]] = {}
        self._next_no = 0
        self.modules = ModuleMap()
        self.chunks = ChunkIndex()
        self._listed: dict[str, str] = {}  # path -> folder, every file listed
        self._todo: deque[str] = deque()
        self._wanted: deque[str] = deque()
        self._walks: deque[str] = deque()  # folders to list
        self._pending: OrderedDict[str, tuple[float, object]] = OrderedDict()  # path -> (due, text|None|_DELETE)
        self._thread: threading.Thread | None = None
        self._stop = False
        self._skip_logged = 0
        self.skipped: Counter[str] = Counter()
        self._skipped: dict[str, str] = {}  # path -> the reason it was skipped (counted once)
        self.epoch = 0
        self.state = "off"  # off | building | ready
        self.started_at: float | None = None
        self.listed_s: float | None = None
        self.first_wanted_s: float | None = None
        self.build_s: float | None = None
        self._lines: OrderedDict[str, tuple[tuple[Any, ...], list[str]]] = OrderedDict()

    # ------------------------------------------------------------------ control
    def set_folders(self, folders: Iterable[str]) -> None:
        """Index exactly ``folders`` (absolute paths); starts the thread on first use."""
        wanted = [os.path.abspath(f) for f in folders if f]
        wanted = list(dict.fromkeys(wanted))
        with self._lock:
            for f in [f for f in self._folders if f not in wanted]:
                self._drop_folder(f)
            for f in wanted:
                if f not in self._folders:
                    self._folders.append(f)
                    self._walks.append(f)
            if self._walks:
                self.state = "building"
                if self.started_at is None or self.build_s is not None:
                    self.started_at = time.monotonic()
                    self.listed_s = self.build_s = None
            self._lock.notify_all()
        self._ensure_thread()

    def change_folders(self, added: Iterable[str], removed: Iterable[str]) -> None:
        """``workspace/didChangeWorkspaceFolders``."""
        with self._lock:
            gone = {os.path.abspath(f) for f in removed}
            now = [f for f in self._folders if f not in gone] + [os.path.abspath(f) for f in added]
        self.set_folders(now)

    def stop(self) -> None:
        """Stop the thread (it ends after the file it is on)."""
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=2.0)

    @property
    def folders(self) -> list[str]:
        with self._lock:
            return list(self._folders)

    def folder_of(self, path: str) -> str | None:
        """The workspace folder that holds ``path`` (the deepest), or ``None``."""
        with self._lock:
            best = None
            for f in self._folders:
                if (path == f or path.startswith(f.rstrip(os.sep) + os.sep)) and (best is None or len(f) > len(best)):
                    best = f
            return best

    # ------------------------------------------------------------------ events
    def changed(self, path: str, text: str | None = None) -> None:
        """A file changed: ``text`` is an open document's new text (applied after
        ``TYPING_QUIET_S`` of quiet), ``None`` means read it from disk now."""
        path = os.path.abspath(path)
        if language_of(path) is None or self.folder_of(path) is None:
            return
        due = time.monotonic() + (TYPING_QUIET_S if text is not None else 0.0)
        with self._lock:
            self._pending.pop(path, None)
            self._pending[path] = (due, text)
            self._lock.notify_all()

    def deleted(self, path: str) -> None:
        """A file was deleted (``workspace/didChangeWatchedFiles``)."""
        path = os.path.abspath(path)
        with self._lock:
            self._pending.pop(path, None)
            self._pending[path] = (0.0, _DELETE)
            self._lock.notify_all()

    def want(self, paths: Iterable[str]) -> None:
        """Parse these listed files before the rest of the build."""
        with self._lock:
            added = False
            for p in paths:
                if p in self._listed and p not in self._entries and p not in self._wanted:
                    self._wanted.append(p)
                    added = True
            if added:
                self._lock.notify_all()

    # ------------------------------------------------------------------ queries
    def entry(self, path: str) -> Entry | None:
        with self._lock:
            return self._entries.get(path)

    def entries(self, nos: Iterable[int]) -> list[Entry]:
        with self._lock:
            return [self._by_no[n] for n in nos if n in self._by_no]

    def in_folder(self, folder: str) -> list[Entry]:
        """The indexed files directly in ``folder``."""
        with self._lock:
            return [e for p, e in self._entries.items() if os.path.dirname(p) == folder]

    def resolve(self, path: str, language: str, imp: Import) -> list[str]:
        """Files of the workspace that ``imp`` of the file at ``path`` names (listed,
        parsed or not), closest first."""
        with self._lock:
            return self.modules.resolve(path, language, imp)

    def defines(self, name: str) -> bool:
        with self._lock:
            return name in self._names

    def names(self) -> list[str]:
        """Every name defined somewhere in the index (unordered)."""
        with self._lock:
            return list(self._names)

    def definitions(self, name: str) -> list[tuple[Entry, Definition]]:
        """Where ``name`` is defined, in index order (files, then lines)."""
        with self._lock:
            out: list[tuple[Entry, Definition]] = []
            for no in self._names.get(name, ()):
                e = self._by_no.get(no)
                if e is None:
                    continue
                out.extend((e, d) for d in e.facts.definitions if d.name == name)
            return out

    def similar(self, query: Iterable[str], exclude: Iterable[str], k: int) -> list[tuple[Entry, int]]:
        """The ``k`` chunks most like the identifiers ``query`` (BM25, ``retrieve.py``),
        skipping the files ``exclude``: ``(entry, first line)``, best first."""
        with self._lock:
            skip = {self._entries[p].no for p in exclude if p in self._entries}
            hits = self.chunks.search(query, skip, k)
            return [(self._by_no[f], line) for _s, f, line in hits if f in self._by_no]

    def lines(self, path: str) -> list[str] | None:
        """The lines of ``path`` (an open document's text when it is open, else the
        file's), ``\\n``-split; ``None`` when it cannot be read."""
        text = self._open_text(path)
        if text is not None:
            return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        try:
            st = os.stat(path)
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            got = self._lines.get(path)
            if got is not None and got[0] == stamp:
                self._lines.move_to_end(path)
                return got[1]
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                lines = fh.read().replace("\r\n", "\n").replace("\r", "\n").split("\n")
        except OSError:
            return None
        with self._lock:
            self._lines[path] = (stamp, lines)
            while len(self._lines) > _LINES_CACHE:
                self._lines.popitem(last=False)
        return lines

    def stats(self) -> dict[str, Any]:
        """For ``sidecar.stats`` ``workspace_index``: ``state``, ``folders``, ``listed``
        and ``files`` (parsed), ``definitions``, ``chunks``, ``skipped`` (by reason),
        ``listed_s``/``first_wanted_s``/``build_s`` (seconds from the start of the build,
        ``None`` until then), ``epoch``."""
        with self._lock:
            return {
                "state": self.state,
                "folders": len(self._folders),
                "listed": len(self._listed),
                "files": len(self._entries),
                "definitions": sum(len(v) for v in self._names.values()),
                "chunks": len(self.chunks),
                "skipped": dict(self.skipped),
                "listed_s": _round(self.listed_s),
                "first_wanted_s": _round(self.first_wanted_s),
                "build_s": _round(self.build_s),
                "epoch": self.epoch,
            }

    # ------------------------------------------------------------------ the thread
    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = False
            self._thread = threading.Thread(target=self._run, name="sidecar-index", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                job = self._next_job()
                if job is None:
                    return
                kind, arg = job
                try:
                    if kind == "walk":
                        self._list_folder(arg)
                    elif kind == "change":
                        path, text = arg
                        self._apply_change(path, text)
                    else:
                        self._index_file(arg, wanted=(kind == "wanted"))
                except Exception:  # noqa: BLE001 - one bad file never stops the index
                    log.warning("workspace index: %s failed", kind, exc_info=True)
                if self._busy():
                    time.sleep(BUSY_PAUSE_S)
                else:
                    time.sleep(0)
        except Exception:  # noqa: BLE001
            log.exception("workspace index stopped")

    def _next_job(self) -> tuple[str, Any] | None:
        with self._lock:
            while True:
                if self._stop:
                    return None
                now = time.monotonic()
                for path, (due, text) in self._pending.items():
                    if due <= now:
                        del self._pending[path]
                        return ("change", (path, text))
                if self._walks:
                    return ("walk", self._walks.popleft())
                while self._wanted:
                    p = self._wanted.popleft()
                    if p in self._listed and p not in self._entries:
                        return ("wanted", p)
                while self._todo:
                    p = self._todo.popleft()
                    if p in self._listed and p not in self._entries:
                        return ("todo", p)
                if self.state == "building":
                    self.state = "ready"
                    if self.started_at is not None:
                        self.build_s = time.monotonic() - self.started_at
                    self.epoch += 1
                    log.info(
                        "workspace index ready: %d files, %d definitions in %.1f s",
                        len(self._entries),
                        sum(len(v) for v in self._names.values()),
                        self.build_s or 0.0,
                    )
                timeout = None
                if self._pending:
                    timeout = max(0.0, min(due for due, _t in self._pending.values()) - now)
                self._lock.wait(timeout)

    def _skip(self, path: str, why: str) -> None:
        """Count and log a skipped file once (a file skipped again for the same reason,
        after another change event, is neither counted nor logged again)."""
        kind = why.split(":", 1)[0]
        if self._skipped.get(path) == kind:
            return
        self._skipped[path] = kind
        while len(self._skipped) > 4 * MAX_FILES:
            self._skipped.pop(next(iter(self._skipped)))
        self.skipped[kind] += 1
        if why == "not source":
            return
        if self._skip_logged < MAX_SKIP_LOGS:
            self._skip_logged += 1
            log.info("workspace index: skipped %s (%s)", path, why)
            if self._skip_logged == MAX_SKIP_LOGS:
                log.info("workspace index: further skipped files are only counted (sidecar.stats)")

    def _list_folder(self, folder: str) -> None:
        with self._lock:
            if folder not in self._folders:
                return
            roots = tuple(self._folders)
            room = MAX_FILES - len(self._listed)
        batch: list[str] = []

        def flush() -> None:
            with self._lock:
                if folder not in self._folders:
                    return
                for p in batch:
                    if p not in self._listed:
                        self._listed[p] = folder
                        self.modules.add(p, os.path.relpath(p, folder))
                        self._todo.append(p)
            batch.clear()

        if not os.path.isdir(folder):
            log.warning("workspace index: the folder %s cannot be read; skipped", folder)
        for path in walk(folder, roots, lambda p, why: self._skip(p, why), max(room, 0), self._excluded):
            batch.append(path)
            if len(batch) >= 256:
                flush()
        flush()
        with self._lock:
            if not self._walks and self.started_at is not None:
                self.listed_s = time.monotonic() - self.started_at
                self.epoch += 1

    def _read(self, path: str) -> tuple[str, tuple[Any, ...]] | None:
        why = skip_reason(path)
        if why is not None:
            self._skip(path, why)
            return None
        try:
            st = os.stat(path)
            with open(path, encoding="utf-8", errors="replace") as fh:
                return fh.read(), (st.st_mtime_ns, st.st_size)
        except OSError as exc:
            self._skip(path, f"unreadable: {exc.strerror or exc}")
            return None

    def _index_file(self, path: str, wanted: bool = False, text: str | None = None) -> bool:
        """Parse ``path`` (``text``: an open document's) into the index; whether its
        entry changed. A file a content-exclusion rule covers is never read, and leaves
        the index if it was in it."""
        rule = self._excluded(path)
        if rule:
            self._skip(path, f"excluded: {rule}")
            with self._lock:
                return self._forget(path)
        if text is None:
            got = self._read(path)
            if got is None:
                with self._lock:
                    return self._forget(path)
            text, stamp = got
        else:
            stamp = ("open", hash(text))
        with self._lock:
            folder = self._listed.get(path)
            old = self._entries.get(path)
        if folder is None or (old is not None and old.stamp == stamp):
            return False
        language = language_of(path) or ""
        fx = facts(text, language)
        line_tokens = [identifiers_of(ln) for ln in text.splitlines()]
        with self._lock:
            if path not in self._listed:
                return False
            self._forget(path, keep_listed=True)
            no = self._next_no
            self._next_no += 1
            e = Entry(no, path, os.path.relpath(path, folder), folder, language, fx, stamp)
            self._entries[path] = e
            self._by_no[no] = e
            for name in {d.name for d in fx.definitions}:
                self._names.setdefault(name, []).append(no)
            self.chunks.add(no, line_tokens)
            if wanted:
                self.epoch += 1
                if self.first_wanted_s is None and self.started_at is not None:
                    self.first_wanted_s = time.monotonic() - self.started_at
        return True

    def _apply_change(self, path: str, text: object) -> None:
        if text is _DELETE:
            with self._lock:
                if self._forget(path):
                    self.epoch += 1
            return
        folder = self.folder_of(path)
        if folder is None:
            return
        with self._lock:
            known = path in self._listed
        why = skip_reason(path) if not isinstance(text, str) else text_skip_reason(text)
        if why is not None and not why.startswith("unreadable: No such file"):
            self._skip(path, why)  # a FIFO, a file grown too large, binary text: dropped, never opened
            with self._lock:
                if self._forget(path):
                    self.epoch += 1
            return
        if not known:
            if not _allowed(folder, path):
                return
            with self._lock:
                self._listed[path] = folder
                self.modules.add(path, os.path.relpath(path, folder))
        if not isinstance(text, str) and not os.path.exists(path):
            with self._lock:
                if self._forget(path):
                    self.epoch += 1
            return
        if self._index_file(path, text=text if isinstance(text, str) else None) and not isinstance(text, str):
            with self._lock:
                self.epoch += 1  # a change on disk; an open document's text is the caller's to see

    def _forget(self, path: str, keep_listed: bool = False) -> bool:
        e = self._entries.pop(path, None)
        if e is not None:
            self._by_no.pop(e.no, None)
            for name in {d.name for d in e.facts.definitions}:
                nos = self._names.get(name)
                if nos is not None:
                    try:
                        nos.remove(e.no)
                    except ValueError:
                        pass
                    if not nos:
                        del self._names[name]
            self.chunks.remove(e.no)
        if not keep_listed:
            folder = self._listed.pop(path, None)
            if folder is not None:
                self.modules.remove(path, os.path.relpath(path, folder))
                return True
        return e is not None

    def _drop_folder(self, folder: str) -> None:
        for p in [p for p, f in self._listed.items() if f == folder]:
            self._forget(p)
        self._folders.remove(folder)
        self.epoch += 1


def _allowed(folder: str, path: str) -> bool:
    """Whether a file found by an event (not by the walk) would have been listed."""
    rel = os.path.relpath(path, folder)
    parts = rel.split(os.sep)
    if any(p.startswith(".") or p in SKIP_DIRS for p in parts[:-1]):
        return False
    specs: list[tuple[str, object]] = []
    here = folder
    for p in [None, *parts[:-1]]:
        if p is not None:
            here = os.path.join(here, p)
        spec = _gitignore(here)
        if spec is not None:
            specs.append((here, spec))
    return not (specs and _ignored(specs, path, False))


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)
