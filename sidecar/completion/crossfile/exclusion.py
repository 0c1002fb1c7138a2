"""Content exclusion: files whose text never informs a suggestion and never travels.

Rules, in gitignore syntax (``pathspec``'s ``GitIgnoreSpec``: ``*``, ``**``, a trailing
``/`` for folders, a leading ``/`` to anchor, ``!`` to take back a file an earlier line
of the same source excluded, ``#`` comments), come from three sources:

- ``.sidecarignore`` at the root of each workspace folder (paths relative to that folder;
  with nested workspace folders, every folder's file applies below it);
- ``.sidecarignore`` in the user's config folder, beside ``config.toml`` (applies in every
  workspace folder, as git's global excludes file does);
- the ``ignore_paths`` setting (a list of patterns, the same way).

A file is excluded when **any** source excludes it: within one source the last matching
line decides, but no source takes back what another excluded, so a repository's own
``.sidecarignore`` (``!*``) cannot switch off the user's rules. A path is matched as given
and with its symbolic links resolved, against the workspace folders as given and
resolved, so a link into an excluded folder is excluded too.

An excluded file:

- is never read by the workspace index, and no snippet of it (open or not) goes into a
  prompt, whatever the backend;
- with a cloud backend, gets no completion at all: no request leaves the machine while
  the cursor is in it (``completion/stream.py``). A local engine still completes in it,
  since nothing leaves the machine.

Bad input: a line ``pathspec`` refuses (a trailing backslash) or with more than
``MAX_STARS`` single ``*`` wildcards (matching such a pattern against a long name can take
seconds: the regular expression backtracks) is skipped and logged once with its file and
line number; the other lines apply. A file is read as UTF-8 (a byte-order mark dropped)
or UTF-16 when it starts with that mark; one with NUL bytes otherwise is not a rules file
(logged once, no rules); past ``MAX_IGNORE_BYTES`` the rest is ignored (logged once). A
file that cannot be read counts as empty. Every ignore file is read again when its
modification time changes (checked at most once per ``RECHECK_S``). ``sidecar doctor``
lists the sources in force with their rules and skipped lines
(:meth:`ContentExclusion.describe`). See docs/architecture.md, "The workspace index".
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

IGNORE_FILE = ".sidecarignore"
#: Bytes of an ignore file read at most.
MAX_IGNORE_BYTES = 256 * 1024
#: Seconds between two checks of an ignore file's modification time.
RECHECK_S = 1.0
#: Single ``*`` wildcards (``**`` not counted) a pattern may hold.
MAX_STARS = 3

_logged: set[tuple[str, ...]] = set()
_logged_lock = threading.Lock()
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _warn_once(key: tuple[str, ...], msg: str, *args: object) -> None:
    with _logged_lock:
        if key in _logged or len(_logged) > 10_000:
            return
        _logged.add(key)
    log.warning(msg, *args)


def shown(text: str) -> str:
    """``text`` safe to print: control characters as ``?``."""
    return _UNPRINTABLE.sub("?", text)


@dataclass(frozen=True)
class RuleSet:
    """The valid patterns of one source, compiled. ``source`` names it for the user (a
    file's path or ``setting ignore_paths``); ``lines`` are the 1-based line numbers of
    ``patterns`` in that source; ``skipped`` the numbers of the lines that were not valid
    patterns; ``problem`` says why the whole file was not read ("" when it was)."""

    source: str
    patterns: tuple[str, ...] = ()
    lines: tuple[int, ...] = ()
    spec: Any = None  # pathspec.GitIgnoreSpec, or None without patterns
    skipped: tuple[int, ...] = ()
    problem: str = ""

    def check(self, rel: str) -> tuple[bool, str] | None:
        """``(excluded, rule)`` from the last pattern matching ``rel`` (a ``/``-separated
        relative path), or None when none matches."""
        if self.spec is None:
            return None
        result = self.spec.check_file(rel)
        if result.include is None:
            return None
        i = result.index if result.index is not None else 0
        return bool(result.include), f"{self.source}:{self.lines[i]}: {shown(self.patterns[i])}"


def _invalid(line: str) -> str | None:
    """Why ``line`` is not a pattern we accept, or None."""
    import pathspec

    if len(line.replace("**", "").split("*")) - 1 > MAX_STARS:
        return f"more than {MAX_STARS} single * wildcards"
    try:
        pathspec.GitIgnoreSpec.from_lines([line])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a bad pattern
        return str(exc)
    return None


def compile_rules(source: str, lines: Iterable[str], problem: str = "") -> RuleSet:
    """A :class:`RuleSet` from gitignore lines; an invalid line is logged once (per
    source, line number and text) and skipped."""
    import pathspec

    patterns: list[str] = []
    numbers: list[int] = []
    skipped: list[int] = []
    for no, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        why = _invalid(line)
        if why is not None:
            skipped.append(no)
            _warn_once(
                ("line", source, str(no), line),
                "content exclusion: %s line %d is not a valid pattern (%s); skipped",
                source,
                no,
                why,
            )
            continue
        patterns.append(line)
        numbers.append(no)
    spec = pathspec.GitIgnoreSpec.from_lines(patterns) if patterns else None
    return RuleSet(source, tuple(patterns), tuple(numbers), spec, tuple(skipped), problem)


def read_rules(path: Path) -> RuleSet:
    """The rules of the ignore file at ``path`` (module doc: encodings, size, binary);
    empty when it is missing or unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_IGNORE_BYTES + 1)
    except OSError:
        return RuleSet(str(path))
    problem = ""
    if len(data) > MAX_IGNORE_BYTES:
        data = data[:MAX_IGNORE_BYTES]
        data = data[: data.rfind(b"\n") + 1]  # no line cut in two
        problem = f"only its first {MAX_IGNORE_BYTES // 1024} KiB read"
        _warn_once(
            ("size", str(path)),
            "content exclusion: %s is larger than %d bytes; the rest is ignored",
            path,
            MAX_IGNORE_BYTES,
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        text = data.decode("utf-16", errors="replace")
    elif b"\x00" in data:
        _warn_once(("binary", str(path)), "content exclusion: %s is not a text file; ignored", path)
        return RuleSet(str(path), problem="not a text file: ignored")
    else:
        text = data.decode("utf-8-sig", errors="replace")
    return compile_rules(str(path), text.splitlines(), problem)


@dataclass
class _Watched:
    """An ignore file and when it was last looked at."""

    path: Path
    checked: float = 0.0
    mtime: int | None = None
    rules: RuleSet = field(default_factory=lambda: RuleSet(""))

    def load(self) -> None:
        self.checked = time.monotonic()
        try:
            self.mtime = os.stat(self.path).st_mtime_ns
        except OSError:
            self.mtime = None
        self.rules = read_rules(self.path) if self.mtime is not None else RuleSet(str(self.path))

    def current(self) -> RuleSet:
        now = time.monotonic()
        if now - self.checked >= RECHECK_S:
            try:
                mtime: int | None = os.stat(self.path).st_mtime_ns
            except OSError:
                mtime = None
            if mtime != self.mtime:
                self.load()
            self.checked = now
        return self.rules


def _variants(path: str) -> set[str]:
    """``path`` absolute, as given and with its links resolved."""
    out = {os.path.abspath(path)}
    try:
        out.add(os.path.realpath(path))
    except (OSError, ValueError):
        pass
    return out


def _rel(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` with ``/`` separators, or None outside it."""
    if not path.startswith(folder.rstrip(os.sep) + os.sep):
        return None
    return os.path.relpath(path, folder).replace(os.sep, "/")


class ContentExclusion:
    """The rules in force (module doc). ``config_dir``: the user's config folder (where
    the user's ``.sidecarignore`` is); ``patterns``: the ``ignore_paths`` setting.
    Thread-safe: the workspace index asks from its own thread."""

    def __init__(self, config_dir: Path | None = None, patterns: Iterable[str] = ()) -> None:
        self._lock = threading.RLock()
        self._user: _Watched | None = None
        if config_dir is not None:
            self._user = _Watched(config_dir / IGNORE_FILE)
            self._user.load()
        self._setting = compile_rules("setting ignore_paths", patterns)
        self._folders: dict[str, _Watched] = {}  # folder (absolute) -> its .sidecarignore
        self._roots: list[tuple[str, str]] = []  # (folder form to match, folder), as given and resolved

    def set_patterns(self, patterns: Iterable[str]) -> None:
        """The ``ignore_paths`` setting changed."""
        rules = compile_rules("setting ignore_paths", patterns)
        with self._lock:
            self._setting = rules

    def set_folders(self, folders: Iterable[str]) -> None:
        """The workspace folders (absolute paths); their ``.sidecarignore`` files are read."""
        with self._lock:
            wanted = list(dict.fromkeys(os.path.abspath(f) for f in folders if f))
            old = self._folders
            self._folders = {}
            for f in wanted:
                w = old.get(f)
                if w is None:
                    w = _Watched(Path(f) / IGNORE_FILE)
                    w.load()
                self._folders[f] = w
            self._roots = [(form, f) for f in wanted for form in sorted(_variants(f))]

    def reload(self) -> None:
        """Read every ignore file again (one of them changed)."""
        with self._lock:
            for w in [self._user, *self._folders.values()]:
                if w is not None:
                    w.load()

    def excluded(self, path: str) -> str | None:
        """The rule that excludes the file at ``path`` (absolute), as ``"source:line:
        pattern"``, or None when no rule does. Outside every workspace folder the user's
        rules and the setting are matched against the path from the file system's root
        (so ``*.pem`` and ``secrets/`` still match; ``/top.py`` does not)."""
        if not path:
            return None
        with self._lock:
            user = self._user.current() if self._user is not None else None
            sources = [r for r in (user, self._setting) if r is not None and r.spec is not None]
            folders = [(form, f, self._folders[f].current()) for form, f in self._roots]
        if not sources and not any(r.spec is not None for _form, _f, r in folders):
            return None
        for candidate in sorted(_variants(path)):
            inside = [(rel, rules) for form, _f, rules in folders if (rel := _rel(candidate, form)) is not None]
            for rel, rules in inside:
                got = rules.check(rel)
                if got is not None and got[0]:
                    return got[1]
            rels = [rel for rel, _r in inside] or [candidate.lstrip(os.sep).replace(os.sep, "/")]
            for rules in sources:
                for rel in rels:
                    got = rules.check(rel)
                    if got is not None and got[0]:
                        return got[1]
        return None

    def _sets(self) -> list[RuleSet]:
        with self._lock:
            sets = [self._user.current()] if self._user is not None else []
            return sets + [self._setting] + [w.current() for w in self._folders.values()]

    def has_problems(self) -> bool:
        """Whether a source had invalid lines or a file was not (wholly) read."""
        return any(r.skipped or r.problem for r in self._sets())

    def describe(self) -> list[str]:
        """One line per source in force, for ``sidecar doctor``: its rules, the lines
        skipped as invalid, why a file was not read; an empty list when there is nothing."""
        out = []
        for r in self._sets():
            if not (r.patterns or r.skipped or r.problem):
                continue
            n = len(r.patterns)
            text = f"{shown(r.source)}: {n} rule{'' if n == 1 else 's'}"
            if r.patterns:
                text += f" ({', '.join(shown(p) for p in r.patterns[:5])}{', ...' if n > 5 else ''})"
            if r.skipped:
                lines = ", ".join(str(x) for x in r.skipped[:5]) + (", ..." if len(r.skipped) > 5 else "")
                text += f"; {len(r.skipped)} invalid line{'' if len(r.skipped) == 1 else 's'} skipped ({lines})"
            if r.problem:
                text += f"; {r.problem}"
            out.append(text)
        return out
