"""Content exclusion: files whose text never informs a suggestion and never travels.

Rules, in gitignore syntax (``pathspec``'s ``GitIgnoreSpec``: ``*``, ``**``, a trailing
``/`` for folders, a leading ``/`` to anchor, ``!`` to take a file back, ``#`` comments),
come from three places:

- ``.sidecarignore`` at the root of each workspace folder (paths relative to that folder);
- ``.sidecarignore`` in the user's config folder, beside ``config.toml`` (applies to every
  workspace folder, as git's global excludes file does);
- the ``ignore_paths`` setting (a list of patterns, the same way).

A file matched by a rule (the last matching rule decides; a folder's own file is read
after the user's rules, so it can take a file back with ``!``):

- is never read by the workspace index, and no snippet of it (open or not) goes into a
  prompt, whatever the backend;
- with a cloud backend, gets no completion at all: no request leaves the machine while
  the cursor is in it (``completion/stream.py``). A local engine still completes in it,
  since nothing leaves the machine.

A line that is not a valid pattern (``pathspec`` refuses it: a trailing backslash) is
logged once, with its file and line number, and skipped; the other lines apply. A file
that cannot be read counts as empty. Folder files are read again when their modification
time changes (checked at most once a second). ``sidecar doctor`` lists the rules that
apply (:meth:`ContentExclusion.describe`). See docs/architecture.md, "Content exclusion".
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

IGNORE_FILE = ".sidecarignore"
#: Bytes of an ignore file read at most.
MAX_IGNORE_BYTES = 256 * 1024
#: Seconds between two checks of a folder file's modification time.
RECHECK_S = 1.0


@dataclass(frozen=True)
class RuleSet:
    """The valid patterns of one source, compiled. ``source`` names it for the user (a
    file's path or ``setting ignore_paths``); ``lines`` are the 1-based line numbers of
    ``patterns`` in that source."""

    source: str
    patterns: tuple[str, ...]
    lines: tuple[int, ...]
    spec: Any  # pathspec.GitIgnoreSpec, or None without patterns

    def check(self, rel: str) -> tuple[bool, str] | None:
        """``(excluded, rule)`` from the last pattern matching ``rel`` (a ``/``-separated
        relative path), or None when none matches."""
        if self.spec is None:
            return None
        result = self.spec.check_file(rel)
        if result.include is None:
            return None
        i = result.index if result.index is not None else 0
        return bool(result.include), f"{self.source}:{self.lines[i]}: {self.patterns[i]}"


_logged_invalid: set[tuple[str, int, str]] = set()
_logged_lock = threading.Lock()


def compile_rules(source: str, lines: Iterable[str]) -> RuleSet:
    """A :class:`RuleSet` from gitignore lines; an invalid line is logged once (per
    source, line number and text) and skipped."""
    import pathspec

    patterns: list[str] = []
    numbers: list[int] = []
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a bad pattern
            key = (source, no, line)
            with _logged_lock:
                first = key not in _logged_invalid
                _logged_invalid.add(key)
            if first:
                log.warning("content exclusion: %s line %d is not a valid pattern (%s); skipped", source, no, exc)
            continue
        patterns.append(line)
        numbers.append(no)
    spec = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
    return RuleSet(source, tuple(patterns), tuple(numbers), spec)


def read_rules(path: Path) -> RuleSet:
    """The rules of the ignore file at ``path`` (empty when it is missing or unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            text = fh.read(MAX_IGNORE_BYTES)
    except OSError:
        return RuleSet(str(path), (), (), None)
    return compile_rules(str(path), text.splitlines())


class ContentExclusion:
    """The rules in force (module doc). ``config_dir``: the user's config folder (where
    the user's ``.sidecarignore`` is); ``patterns``: the ``ignore_paths`` setting.
    Thread-safe: the workspace index asks from its own thread."""

    def __init__(self, config_dir: Path | None = None, patterns: Iterable[str] = ()) -> None:
        self._lock = threading.RLock()
        self._config_dir = config_dir
        self._user = read_rules(config_dir / IGNORE_FILE) if config_dir is not None else None
        self._setting = compile_rules("setting ignore_paths", patterns)
        self._folders: dict[str, tuple[float, int | None, RuleSet]] = {}  # folder -> (checked at, mtime_ns, rules)

    def set_patterns(self, patterns: Iterable[str]) -> None:
        """The ``ignore_paths`` setting changed."""
        rules = compile_rules("setting ignore_paths", patterns)
        with self._lock:
            self._setting = rules

    def set_folders(self, folders: Iterable[str]) -> None:
        """The workspace folders (absolute paths); their ``.sidecarignore`` files are read."""
        with self._lock:
            wanted = [os.path.abspath(f) for f in folders if f]
            self._folders = {f: self._folders.get(f) or self._load(f) for f in wanted}

    def reload(self) -> None:
        """Read every ignore file again (one of them changed)."""
        with self._lock:
            if self._config_dir is not None:
                self._user = read_rules(self._config_dir / IGNORE_FILE)
            self._folders = {f: self._load(f) for f in self._folders}

    @staticmethod
    def _mtime(folder: str) -> int | None:
        try:
            return os.stat(os.path.join(folder, IGNORE_FILE)).st_mtime_ns
        except OSError:
            return None

    def _load(self, folder: str) -> tuple[float, int | None, RuleSet]:
        return time.monotonic(), self._mtime(folder), read_rules(Path(folder) / IGNORE_FILE)

    def _folder_rules(self, folder: str) -> RuleSet:
        checked, mtime, rules = self._folders[folder]
        now = time.monotonic()
        if now - checked >= RECHECK_S:
            current = self._mtime(folder)
            if current != mtime:
                self._folders[folder] = self._load(folder)
                return self._folders[folder][2]
            self._folders[folder] = (now, mtime, rules)
        return rules

    def excluded(self, path: str) -> str | None:
        """The rule that excludes the file at ``path`` (absolute), as ``"source:line:
        pattern"``, or None when no rule does. Outside every workspace folder the
        user's rules and the setting are matched against the path from the file system's
        root (so ``*.pem`` and ``secrets/`` still match; ``/top.py`` does not)."""
        if not path:
            return None
        path = os.path.abspath(path)
        with self._lock:
            folder = None
            for f in self._folders:
                if path.startswith(f.rstrip(os.sep) + os.sep) and (folder is None or len(f) > len(folder)):
                    folder = f
            rel = os.path.relpath(path, folder) if folder else path.lstrip(os.sep)
            rel = rel.replace(os.sep, "/")
            sets = [r for r in (self._user, self._setting) if r is not None]
            if folder is not None:
                sets.append(self._folder_rules(folder))
        verdict: tuple[bool, str] | None = None
        for rules in sets:
            got = rules.check(rel)
            if got is not None:
                verdict = got
        return verdict[1] if verdict is not None and verdict[0] else None

    def describe(self) -> list[str]:
        """One line per source of rules in force: ``"<source>: N rule(s)"`` (for ``sidecar
        doctor``); an empty list when there are none."""
        with self._lock:
            sets = [r for r in (self._user, self._setting) if r is not None]
            sets += [self._folder_rules(f) for f in self._folders]
        return [
            f"{r.source}: {len(r.patterns)} rule{'s' if len(r.patterns) != 1 else ''} ({', '.join(r.patterns[:5])}"
            f"{', ...' if len(r.patterns) > 5 else ''})"
            for r in sets
            if r.patterns
        ]
