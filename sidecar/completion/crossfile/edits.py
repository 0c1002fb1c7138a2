"""Recently edited places of each open document, recorded from ``didChange``.

The lines around each of the last ``MAX_REGIONS`` edited places of a document are the
first snippets ``select.py`` offers (documents edited most recently first). A
full-document change records nothing (no place is known); an edit within
``MERGE_LINES`` lines of a recorded place refreshes it instead of adding one; recorded
lines below an edit move with the lines it adds or removes. A closed document's record
is dropped (``CrossFileContext.closed``). See docs/architecture.md ("What the model
sees").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MERGE_LINES = 8  # an edit this close to a recorded region refreshes it
MAX_REGIONS = 3  # edited regions kept per document


@dataclass
class _Edits:
    lines: list[int] = field(default_factory=list)  # most recent first
    stamp: int = 0  # global order of the last edit


class EditLog:
    """Recently edited places per document, from ``didChange`` content changes."""

    def __init__(self) -> None:
        self._docs: dict[str, _Edits] = {}
        self._clock = 0

    def record(self, uri: str, changes: Iterable[Any]) -> None:
        """Record LSP content changes (objects or dicts with ``range`` and ``text``). A
        change without a range (the whole document) records nothing. Recorded lines
        below an edit move with the lines it adds or removes."""
        for ch in changes:
            rng = _get(ch, "range")
            text = _get(ch, "text")
            if rng is None or not isinstance(text, str):
                continue
            start, end = _get(_get(rng, "start"), "line"), _get(_get(rng, "end"), "line")
            if not isinstance(start, int) or not isinstance(end, int):
                continue
            if end < start:
                start, end = end, start
            added = text.count("\n") + text.count("\r") - text.count("\r\n")
            delta = added - (end - start)
            rec = self._docs.setdefault(uri, _Edits())
            line = start + added
            moved = [ln + delta if ln > end else ln for ln in rec.lines]
            rec.lines = [line] + [ln for ln in moved if abs(ln - line) > MERGE_LINES][: MAX_REGIONS - 1]
            self._clock += 1
            rec.stamp = self._clock

    def forget(self, uri: str) -> None:
        self._docs.pop(uri, None)

    def regions(self, uri: str) -> list[int]:
        """Edited lines of ``uri`` (0-based), most recent first."""
        rec = self._docs.get(uri)
        return list(rec.lines) if rec else []

    def stamp(self, uri: str) -> int:
        """When ``uri`` was last edited, as a counter (0: never)."""
        rec = self._docs.get(uri)
        return rec.stamp if rec else 0


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)
