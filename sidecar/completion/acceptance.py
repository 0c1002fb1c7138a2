"""Shown and accepted suggestions: what the editor was given, what the user took, and
where the next line starts when an accept ends one (for speculative prefetch).

An accept arrives as the ``sidecar.accepted`` command with the item's id and, for a
partial accept, how many UTF-16 code units of it were taken (LSP positions count UTF-16
by default). Counters: ``suggestions.shown``, ``tokens.shown``, ``accepted``,
``accepted_chars``, ``tokens.accepted``, ``accepted_partial``. See docs/architecture.md.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable

from . import tokens
from .prefetch import next_line_indent
from .request import Request

#: Shown suggestions remembered for accepts (the oldest are forgotten first).
MAX_SHOWN = 256


class Acceptance:
    """The last ``MAX_SHOWN`` suggestions shown, by item id, and the accept counters."""

    def __init__(self, metrics, gate=None) -> None:
        self.metrics = metrics
        self.gate = gate  # the confidence gate (gate.py): told what became of each suggestion
        # Per document, the last suggestion shown and not labelled yet: ``(item id,
        # doc_prefix, doc_suffix, text, gate features, request id)``.
        self._open: dict[str, tuple[str, str, str, str, object, int]] = {}
        self._shown: OrderedDict[str, tuple[str, str, str, str, str, str, str, int]] = OrderedDict()
        # What was taken of each accepted item so far (a word-by-word accept goes on).
        self._taken: OrderedDict[str, str] = OrderedDict()
        # Requests whose suggestion was counted as shown (by its answer or an update): once.
        self._counted: OrderedDict[int, None] = OrderedDict()
        #: Called with ``(uri, doc_prefix, taken, eol)`` for each accept that took text
        #: (``retention.py`` follows it through later edits).
        self.on_taken: Callable[[str, str, str, str], None] | None = None

    def shown(self, item_id: str, req: Request, text: str) -> None:
        """Remember a suggestion handed to the editor, so an accept can be traced back."""
        self.metrics.count("suggestions.shown")
        self.metrics.count("tokens.shown", tokens.count(text) if text else 0)
        self._count_once(req.id)
        self._remember(item_id, req, text)
        if req.gate_features is not None:
            self._open[req.uri] = (item_id, req.doc_prefix, req.doc_suffix, text, req.gate_features, req.id)

    def shown_update(self, item_id: str, req: Request, text: str) -> None:
        """The update item ``item_id`` (``u<request id>.<seq>``, updates.py) carrying
        ``text`` went to the editor: an accept of it is counted, retained and labelled
        exactly as an answer's item. The suggestion counts as shown once per request,
        at its first update with text when the request itself was answered with nothing."""
        if not text:
            return
        self._remember(item_id, req, text)
        if self._count_once(req.id):
            self.metrics.count("suggestions.shown")
            self.metrics.count("tokens.shown", tokens.count(text))

    def _count_once(self, req_id: int) -> bool:
        """True the first time ``req_id`` is seen (its suggestion is counted as shown)."""
        if req_id in self._counted:
            return False
        self._counted[req_id] = None
        while len(self._counted) > MAX_SHOWN:
            self._counted.popitem(last=False)
        return True

    def shown_by_update(self, req: Request, text: str) -> None:
        """``req`` was answered with nothing and its first text went out as an update
        (items ``u<request id>.<seq>``): the gate's label follows that suggestion."""
        if req.gate_features is not None and text:
            self._open[req.uri] = (f"u{req.id}", req.doc_prefix, req.doc_suffix, text, req.gate_features, req.id)

    def _remember(self, item_id: str, req: Request, text: str) -> None:
        self._shown[item_id] = (req.uri, req.doc_prefix, req.doc_suffix, text, req.ctx.language, req.ctx.line_suffix,
                                req.ctx.eol, req.id)
        self._shown.move_to_end(item_id)
        while len(self._shown) > MAX_SHOWN:
            self._shown.popitem(last=False)

    def _label(self, item_id: str, accepted: bool) -> None:
        """Tell the gate what became of the open suggestion ``item_id`` (once). Any item
        of the same request stands for its suggestion: the answer's ``c<n>`` and its
        updates' ``u<request id>.<seq>``."""
        shown = self._shown.get(item_id)
        req_id = shown[7] if shown is not None else None
        for uri, rec in list(self._open.items()):
            if rec[0] == item_id or (req_id is not None and rec[5] == req_id) \
                    or (rec[0].startswith("u") and item_id.startswith(rec[0] + ".")):
                del self._open[uri]
                if self.gate is not None:
                    self.gate.outcome(rec[4], accepted)

    def moved_on(self, req: Request) -> None:
        """A new request in ``req.uri``: the suggestion last shown there was typed out by
        hand (its first line: an accept), is still being typed through (no label yet), is
        asked for again at the same place (no label), or was passed over (a reject)."""
        rec = self._open.get(req.uri)
        if rec is None:
            return
        item_id, prefix, suffix, text, _f, _r = rec
        if req.doc_prefix.startswith(prefix):
            typed = req.doc_prefix[len(prefix):]
            first = _first_line(text)
            if first.strip() and typed.startswith(first):
                self._label(item_id, True)
                return
            if not typed and req.doc_suffix == suffix:
                return  # the same place again
            if typed and text.startswith(typed):
                return  # typing through it
        self._label(item_id, False)

    def accepted(self, item_id: str, chars: int | None) -> tuple[str, str, str, str] | None:
        """Count the accept of ``item_id`` (``chars`` UTF-16 units of it, or all).

        Returns ``(uri, doc_prefix, doc_suffix, language)`` of the document as it will be
        once the user is on the next line, when the whole suggestion was taken and nothing
        follows it on its line (the next line is worth speculating); else None. An id
        that was never shown, or was forgotten (``MAX_SHOWN``), counts only as
        ``accepted_unknown``: the acceptance rate counts what can be traced back."""
        rec = self._shown.get(item_id)
        if rec is None:
            self.metrics.count("accepted_unknown")
            return None
        uri, doc_prefix, doc_suffix, text, language, line_suffix, eol, _req_id = rec
        taken = take_units(text, chars) if chars is not None else text
        before = self._taken.get(item_id)
        if before is not None:
            # The same item again: a word-by-word accept goes on (only what it adds
            # counts), or the client repeated itself (nothing counts twice).
            if len(taken) <= len(before) or not taken.startswith(before):
                self.metrics.count("accepted_repeat")
                return None
        else:
            self.metrics.count("accepted")
            self._label(item_id, True)
        self._taken[item_id] = taken
        while len(self._taken) > MAX_SHOWN:
            self._taken.popitem(last=False)
        added = taken[len(before or ""):]
        self.metrics.count("accepted_chars", len(added))
        if added and self.on_taken is not None:
            self.on_taken(uri, doc_prefix + (before or ""), added, eol)
        self.metrics.count("tokens.accepted", tokens.count(added) if added else 0)
        if taken != text:
            self.metrics.count("accepted_partial")
            return None
        if line_suffix.strip():
            return None  # text follows on the line: no next line to speculate
        accepted_prefix = doc_prefix + text
        last_line = accepted_prefix[accepted_prefix.rfind("\n") + 1:]
        return uri, accepted_prefix + "\n" + next_line_indent(last_line), doc_suffix, language


def _first_line(text: str) -> str:
    body = text[1:] if text.startswith("\n") else text
    return ("\n" if text.startswith("\n") else "") + body.split("\n", 1)[0]


def take_units(text: str, units: int) -> str:
    """The start of ``text`` that is ``units`` UTF-16 code units long."""
    n = 0
    for i, ch in enumerate(text):
        if n >= units:
            return text[:i]
        n += 2 if ord(ch) > 0xFFFF else 1
    return text
