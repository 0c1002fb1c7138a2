"""Accepted-and-retained characters: how much of an accepted suggestion is still in the
document some time after the accept (by default 30 s and 2 min).

Acceptance alone overstates what a suggestion was worth: a user who takes a suggestion
and then deletes or rewrites half of it got half. So after an accept, the characters
the user took are followed through the document's edits (``textDocument/didChange``,
LSP 3.17 §TextDocumentContentChangeEvent: each change's range is in the document as the
changes before it in the same notification left it). A character survives while no
edit touches it; an edit whose range covers it removes it, and what the edit inserts
is new text, never a retained character (a rewrite of ``x`` into ``x`` does not count).
At each horizon the survivors are counted:

- ``retention.accepted_chars.<h>``: accepted characters whose horizon ``h`` has passed;
- ``retention.retained_chars.<h>``: how many of them were still in the document then;

``<h>`` is the horizon in seconds (``30s``, ``120s``). A document closed before a
horizon is measured as it was closed. Characters count Python code points of the
suggestion with ``\\n`` line breaks (a ``\\r\\n`` document's ``\\r`` is not counted).

Positions come from the document text the LSP layer holds (``text_of``); changes with a
range are applied to this module's own copy of the text, so the offsets stay exact
across several changes in one notification; a full-text change (or a copy that no
longer matches the editor's document) is diffed as one edit: the common start and end
are kept, the middle counts as rewritten. See docs/architecture.md, "Acceptance".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: The default horizons, in seconds after the accept.
HORIZONS_S = (30.0, 120.0)
#: ``(text, line, character) -> offset`` for an LSP position (raises ValueError).
Locate = Callable[[str, int, int], int]
#: How long an accept waits for its text to show up in the document (an editor may run
#: the accept command before it sends the insertion's didChange), in seconds.
PLACE_WINDOW_S = 3.0


def horizon_label(h: float) -> str:
    """``30.0`` -> ``"30s"``, ``0.5`` -> ``"0.5s"``."""
    return f"{h:g}s"


@dataclass
class _Tracked:
    """One accept: the current offsets of its surviving characters."""

    uri: str
    alive: list[int]  # sorted offsets in the document text (code points)
    total: int  # characters accepted (without ``\r``)
    pending: set[float] = field(default_factory=set)  # horizons not measured yet
    timers: list[asyncio.TimerHandle] = field(default_factory=list)


@dataclass
class _Unplaced:
    """An accept whose text is not in the document yet."""

    uri: str
    offset: int
    text: str  # as inserted (the document's line breaks)
    total: int
    until: float  # time.monotonic() after which it is given up


class RetentionTracker:
    """Follows accepted text through the document's edits (module doc).

    ``text_of(uri)`` returns the editor's current text of ``uri`` (None: not open);
    ``horizons_s`` are seconds after each accept at which survivors are counted.
    """

    def __init__(
        self, metrics: Any, text_of: Callable[[str], str | None] | None = None, horizons_s: Iterable[float] = HORIZONS_S
    ) -> None:
        self.metrics = metrics
        self.text_of: Callable[[str], str | None] = text_of or (lambda _uri: None)
        self.horizons_s = tuple(sorted({float(h) for h in horizons_s if h > 0}))
        self._texts: dict[str, str] = {}  # our copy of each document with tracked text
        self._tracked: list[_Tracked] = []
        self._unplaced: list[_Unplaced] = []

    # ------------------------------------------------------------------ accepts
    def accepted(self, uri: str, doc_prefix: str, taken: str, eol: str = "\n") -> None:
        """The user took ``taken`` (``\\n`` line breaks) at the end of ``doc_prefix`` (the
        request's document text before the cursor, ``\\n`` line breaks) in ``uri``."""
        total = len(taken)
        if not total or not self.horizons_s:
            return
        offset = len(doc_prefix) + doc_prefix.count("\n") * (len(eol) - 1)
        raw = taken.replace("\n", eol) if eol != "\n" else taken
        self.metrics.count("retention.accepts")
        self._unplaced.append(_Unplaced(uri, offset, raw, total, time.monotonic() + PLACE_WINDOW_S))
        self._place(uri)

    def _place(self, uri: str) -> None:
        """Start following the accepts of ``uri`` whose text is now in the document."""
        now = time.monotonic()
        keep: list[_Unplaced] = []
        text = None
        for u in self._unplaced:
            if u.uri != uri:
                keep.append(u)
                continue
            if text is None:
                text = self.text_of(uri)
            if text is not None and text.startswith(u.text, u.offset):
                self._texts[uri] = text
                alive = [u.offset + i for i, ch in enumerate(u.text) if ch != "\r"]
                self._start_following(_Tracked(uri, alive, u.total, set(self.horizons_s)))
            elif now < u.until:
                keep.append(u)
            else:
                self.metrics.count("retention.unplaced")
        self._unplaced = keep

    def _start_following(self, t: _Tracked) -> None:
        self._tracked.append(t)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): measured at close only
            return
        t.timers = [loop.call_later(h, self._measure, t, h) for h in self.horizons_s]

    # ------------------------------------------------------------------ edits
    def changed(self, uri: str, changes: Iterable[Any], locate: Locate) -> None:
        """``didChange`` of ``uri`` with its ``content_changes`` (LSP
        ``TextDocumentContentChangeEvent``s), after the LSP layer applied them.
        ``locate(text, line, character)`` is the string offset of an LSP position in
        ``text`` (the negotiated encoding's units); it raises ValueError outside it."""
        old = self._texts.get(uri)
        if old is not None:
            self._texts[uri] = self._apply(uri, old, changes, locate)
        if any(u.uri == uri for u in self._unplaced):
            self._place(uri)  # the insertion of an accept that came first

    def _apply(self, uri: str, old: str, changes: Iterable[Any], locate: Locate) -> str:
        """Apply ``changes`` to our copy ``old`` of ``uri`` and to its tracked text;
        return the new copy (the editor's text where they differ)."""
        text = old
        try:
            for ch in changes:
                rng = getattr(ch, "range", None)
                new_text = getattr(ch, "text", "")
                if rng is None:
                    text = self._diff_edit(uri, text, new_text)
                    continue
                s = locate(text, rng.start.line, rng.start.character)
                e = locate(text, rng.end.line, rng.end.character)
                if e < s:
                    s, e = e, s
                self._edit(uri, s, e, len(new_text))
                text = text[:s] + new_text + text[e:]
        except ValueError:
            log.debug("retention: a change outside our copy of %s; diffing", uri)
        current = self.text_of(uri)
        if current is not None and current != text:
            text = self._diff_edit(uri, text, current)  # our copy drifted: one diff edit
        return text

    def _diff_edit(self, uri: str, old: str, new: str) -> str:
        """Apply ``old`` -> ``new`` as one edit (common start and end kept); return ``new``."""
        n = min(len(old), len(new))
        p = _common_prefix(old, new, n)
        q = _common_suffix(old, new, n - p)
        self._edit(uri, p, len(old) - q, len(new) - q - p)
        return new

    def _edit(self, uri: str, start: int, end: int, inserted: int) -> None:
        """Characters in ``[start, end)`` were replaced by ``inserted`` new ones."""
        delta = inserted - (end - start)
        for t in self._tracked:
            if t.uri != uri:
                continue
            if start == end and delta == 0:
                continue
            t.alive = [o for o in t.alive if o < start] + [o + delta for o in t.alive if o >= end]

    # ------------------------------------------------------------------ counting
    def _measure(self, t: _Tracked, h: float) -> None:
        if h not in t.pending:
            return
        t.pending.discard(h)
        label = horizon_label(h)
        self.metrics.count(f"retention.accepted_chars.{label}", t.total)
        self.metrics.count(f"retention.retained_chars.{label}", len(t.alive))
        if not t.pending:
            self._drop(t)

    def _drop(self, t: _Tracked) -> None:
        for timer in t.timers:
            timer.cancel()
        if t in self._tracked:
            self._tracked.remove(t)
        if not any(x.uri == t.uri for x in self._tracked) and not any(u.uri == t.uri for u in self._unplaced):
            self._texts.pop(t.uri, None)

    def closed(self, uri: str) -> None:
        """``didClose``: what is still tracked in ``uri`` is measured as it is now."""
        for t in [t for t in self._tracked if t.uri == uri]:
            for h in sorted(t.pending):
                self._measure(t, h)
        self._unplaced = [u for u in self._unplaced if u.uri != uri]
        self._texts.pop(uri, None)

    def close(self) -> None:
        """Stop the timers (the session ends; unmeasured horizons are dropped)."""
        for t in self._tracked:
            for timer in t.timers:
                timer.cancel()
        self._tracked.clear()
        self._unplaced.clear()
        self._texts.clear()

    def following(self) -> int:
        """Accepts being followed now."""
        return len(self._tracked)


def summary(counters: dict[str, int]) -> list[dict[str, Any]]:
    """The ``retained`` rows of ``sidecar.stats``: per horizon, accepted characters whose
    horizon passed, how many were retained and the share (None before any)."""
    rows = []
    head = "retention.accepted_chars."
    labels = sorted({k[len(head) :] for k in counters if k.startswith(head)}, key=lambda lab: float(lab[:-1]))
    for lab in labels:
        acc = counters.get(f"retention.accepted_chars.{lab}", 0)
        ret = counters.get(f"retention.retained_chars.{lab}", 0)
        rows.append(
            {
                "after": lab,
                "accepted_chars": acc,
                "retained_chars": ret,
                "retained_pct": round(100 * ret / acc, 1) if acc else None,
            }
        )
    return rows


def _common_prefix(a: str, b: str, limit: int) -> int:
    """Length of the common start of ``a`` and ``b`` (at most ``limit``), by halving
    (each comparison runs in C)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common end of ``a`` and ``b`` (at most ``limit``)."""
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid :] == b[len(b) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    return lo
