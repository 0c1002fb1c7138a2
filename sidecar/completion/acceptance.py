"""Shown and accepted suggestions: what the editor was given, what the user took, and
where the next line starts when an accept ends one (for speculative prefetch).

An accept arrives as the ``sidecar.acceptCompletion`` command with the item's id and, for
a partial accept (a word or a line), how much of it was taken so far from the item's
start (the LSP surface turns the editor's code units into characters of the
suggestion: ``lsp/inline.py`` ``HandedOut``). A client that reports what it displayed sends the
``sidecar/didShowCompletion`` notification with the item's id (docs/editors.md).

One suggestion may reach the editor as several items: its answer, its streamed updates,
and, after the user typed or took its start, its rest answered again at the new cursor.
They are one suggestion here (``_Suggestion``): shown once, accepted once, however many
words and lines were taken from it.

Counters (characters are Python characters, i.e. code points):
``suggestions.shown`` (answered with text, once per request), ``suggestions.displayed``
(reported displayed by the client, once per suggestion), ``tokens.shown``, ``accepted``
(suggestions with any accept, once each), ``accepts.full`` and ``accepts.partial`` (accept
commands that took the whole item shown, or part of it), ``accepted_chars`` with
``accepted_chars.full`` and ``accepted_chars.partial``, ``tokens.accepted``,
``accepted.displayed`` (accepted suggestions the editor reported displayed: the rate's
numerator), ``accepted_repeat``, ``accepted_nothing``, ``accepted_unknown``,
``displayed_unknown``. See docs/architecture.md
and docs/operations.md.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from . import tokens
from .gate import Features, Gate
from .prefetch import next_line_indent
from .request import Request

#: Shown suggestions remembered for accepts (the oldest are forgotten first).
MAX_SHOWN = 256


@dataclass
class _Suggestion:
    """What one document was last shown, across the items that carried it."""

    id: int
    prefix: str  # the document before the cursor where it was first shown
    text: str  # all of it, from there


@dataclass
class _Shown:
    """One item handed to the editor, for tracing an accept back."""

    uri: str
    doc_prefix: str
    doc_suffix: str
    text: str
    language: str
    line_suffix: str
    eol: str
    req_id: int
    suggestion: int  # ``_Suggestion.id``


@dataclass
class _Open:
    """The last suggestion shown in a document and not labelled yet (gate.py, "Labels").
    A suggestion typed through and shown again (its rest, from a later request) stays
    this one suggestion, with one label."""

    items: set[str]  # item ids that stand for it: ``c<n>``, and ``u<request id>`` for updates
    req_ids: set[int]
    prefix: str  # the document before and after the cursor where it was first shown
    suffix: str
    text: str
    features: Features
    at: float  # when it was first shown (time.monotonic(), s)
    suggestion: int  # ``_Suggestion.id``


class Acceptance:
    """The last ``MAX_SHOWN`` suggestions shown, by item id, and the accept counters."""

    def __init__(self, metrics, gate: Gate | None = None) -> None:
        self.metrics = metrics
        self.gate = gate  # the confidence gate (gate.py): told what became of each suggestion
        # Per document, the last suggestion shown and not labelled yet.
        self._open: dict[str, _Open] = {}
        self._shown: OrderedDict[str, _Shown] = OrderedDict()
        # Per document, the suggestion shown there last (items of one suggestion link to it).
        self._last: dict[str, _Suggestion] = {}
        self._suggestion_ids = 0
        # Suggestions already counted as displayed, and as accepted: once each.
        self._displayed: OrderedDict[int, None] = OrderedDict()
        self._accepted: OrderedDict[int, None] = OrderedDict()
        # Suggestions the gate was told about: a rest shown after a partial accept is not
        # labelled again.
        self._labelled: OrderedDict[int, None] = OrderedDict()
        # What was taken so far from each start of a suggestion (the items of one request,
        # its answer and its updates, start at the same place): a word-by-word accept goes
        # on, and a second item of the same start counts only what it adds.
        self._taken: OrderedDict[tuple[int, str], str] = OrderedDict()
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
        self._opened(item_id, req, text)

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
        return _once(self._counted, req_id)

    def shown_here(self, req: Request, text: str) -> bool:
        """``text`` is the suggestion last shown in ``req``'s document, at ``req``'s very
        place (the same document text before and after the cursor), or more or less of it:
        the editor asks again where it shows it (VS Code's re-trigger for the rest of a
        streamed suggestion, sidecar.el asking for the rest). Not yet labelled for the gate."""
        rec = self._open.get(req.uri)
        return (
            rec is not None
            and bool(text)
            and rec.prefix == req.doc_prefix
            and rec.suffix == req.doc_suffix
            and (text.startswith(rec.text) or rec.text.startswith(text))
        )

    def shown_by_update(self, req: Request, text: str) -> None:
        """``req`` was answered with nothing and its first text went out as an update
        (items ``u<request id>.<seq>``): the gate's label follows that suggestion."""
        self._opened(f"u{req.id}", req, text)

    def _opened(self, item: str, req: Request, text: str) -> None:
        """``text`` was shown for ``req`` (as item ``item``): the gate's next label is its."""
        if req.gate_features is None or not text:
            return
        sid = self._suggestion(req, text)
        if sid in self._labelled:
            return
        rec = self._open.get(req.uri)
        if rec is not None and req.doc_prefix.startswith(rec.prefix):
            typed = req.doc_prefix[len(rec.prefix) :]
            rest = rec.text[len(typed) :]
            if typed and rec.text.startswith(typed) and (rest.startswith(text) or text.startswith(rest)):
                # The same suggestion, typed through and shown again: still one label.
                rec.items.add(item)
                rec.req_ids.add(req.id)
                if len(text) > len(rest):
                    rec.text = typed + text
                return
        self._open[req.uri] = _Open(
            {item}, {req.id}, req.doc_prefix, req.doc_suffix, text, req.gate_features, time.monotonic(), sid
        )

    def _remember(self, item_id: str, req: Request, text: str) -> None:
        self._shown[item_id] = _Shown(
            req.uri,
            req.doc_prefix,
            req.doc_suffix,
            text,
            req.ctx.language,
            req.ctx.line_suffix,
            req.ctx.eol,
            req.id,
            self._suggestion(req, text),
        )
        self._shown.move_to_end(item_id)
        while len(self._shown) > MAX_SHOWN:
            self._shown.popitem(last=False)

    def _suggestion(self, req: Request, text: str) -> int:
        """The id of the suggestion ``text`` shown for ``req`` belongs to: the document's
        last one when ``text`` goes on from it (the same place, or after typing or taking
        its start), else a new one."""
        last = self._last.get(req.uri)
        if last is not None and req.doc_prefix.startswith(last.prefix):
            typed = req.doc_prefix[len(last.prefix) :]
            rest = last.text[len(typed) :]
            if last.text.startswith(typed) and rest and (rest.startswith(text) or text.startswith(rest)):
                if len(text) > len(rest):
                    last.text = typed + text  # a longer rest: the stream grew
                return last.id
        self._suggestion_ids += 1
        self._last[req.uri] = _Suggestion(self._suggestion_ids, req.doc_prefix, text)
        return self._suggestion_ids

    def displayed(self, item_id: str) -> None:
        """The editor reports that it displayed ``item_id`` (``sidecar/didShowCompletion``):
        count its suggestion as displayed, once, however many of its items are reported.
        An id never handed out, or forgotten (``MAX_SHOWN``), counts only as
        ``displayed_unknown``."""
        rec = self._shown.get(item_id)
        if rec is None:
            self.metrics.count("displayed_unknown")
            return
        if _once(self._displayed, rec.suggestion):
            self.metrics.count("suggestions.displayed")
            if rec.suggestion in self._accepted:  # the accept came first
                self.metrics.count("accepted.displayed")

    def _label(self, item_id: str, accepted: bool) -> None:
        """Tell the gate what became of the open suggestion ``item_id`` (once). Any item
        of the same request stands for its suggestion: the answer's ``c<n>`` and its
        updates' ``u<request id>.<seq>``."""
        shown = self._shown.get(item_id)
        req_id = shown.req_id if shown is not None else None
        for uri, rec in list(self._open.items()):
            if (
                item_id in rec.items
                or req_id in rec.req_ids
                or any(i.startswith("u") and item_id.startswith(i + ".") for i in rec.items)
            ):
                del self._open[uri]
                _once(self._labelled, rec.suggestion)
                if self.gate is not None:
                    self.gate.learn(rec.features, accepted)

    def moved_on(self, req: Request) -> None:
        """A new request in ``req.uri``: the suggestion last shown there was typed out by
        hand (its first line: an accept), is still being typed through (no label yet), is
        asked for again at the same place (no label), was partly typed before the user
        went on differently (some of it was right: an accept, as the gate's fit counts
        it), or was passed over without any of it typed (a reject, if it was on screen
        at least ``gate.seen_ms``; else no label: it was not read). gate.py, "Labels"."""
        rec = self._open.get(req.uri)
        if rec is None:
            return
        prefix, suffix, text = rec.prefix, rec.suffix, rec.text
        if req.doc_prefix.startswith(prefix):
            typed = req.doc_prefix[len(prefix) :]
            first = _first_line(text)
            if first.strip() and typed.startswith(first):
                self._label_open(req.uri, True)
                return
            if not typed and req.doc_suffix == suffix:
                return  # the same place again
            if typed and text.startswith(typed):
                return  # typing through it
            if typed[:1] and text.startswith(typed[:1]):
                self._label_open(req.uri, True)  # its start was typed, then something else
                return
        if self.gate is not None and (time.monotonic() - rec.at) * 1000.0 < self.gate.seen_ms:
            del self._open[req.uri]
            _once(self._labelled, rec.suggestion)
            self.gate.unseen()
            return
        self._label_open(req.uri, False)

    def _label_open(self, uri: str, accepted: bool) -> None:
        rec = self._open.pop(uri)
        _once(self._labelled, rec.suggestion)
        if self.gate is not None:
            self.gate.learn(rec.features, accepted)

    def accepted(self, item_id: str, chars: int | None) -> tuple[str, str, str, str] | None:
        """Count the accept of ``item_id``: ``chars`` characters of it (taken so far from
        its start), or all of it.

        Returns ``(uri, doc_prefix, doc_suffix, language)`` of the document as it will be
        once the user is on the next line, when the whole suggestion was taken and nothing
        follows it on its line (the next line is worth speculating); else None. An id
        that was never shown, or was forgotten (``MAX_SHOWN``), counts only as
        ``accepted_unknown``: the acceptance rate counts what can be traced back. An
        accept that took nothing counts only as ``accepted_nothing``."""
        rec = self._shown.get(item_id)
        if rec is None:
            self.metrics.count("accepted_unknown")
            return None
        text = rec.text
        taken = text[: max(0, chars)] if chars is not None else text
        if not taken:
            self.metrics.count("accepted_nothing")
            return None
        start = (rec.suggestion, rec.doc_prefix)
        before = self._taken.get(start)
        if before is not None and (len(taken) <= len(before) or not taken.startswith(before)):
            # Nothing more from this start: the client repeated itself, or another item
            # of the same start took no further.
            self.metrics.count("accepted_repeat")
            return None
        if _once(self._accepted, rec.suggestion):
            self.metrics.count("accepted")
            if rec.suggestion in self._displayed:
                self.metrics.count("accepted.displayed")
        self._label(item_id, True)  # the gate: some of it was right (a partial accept too)
        self._taken[start] = taken
        self._taken.move_to_end(start)
        while len(self._taken) > MAX_SHOWN:
            self._taken.popitem(last=False)
        # A word-by-word accept goes on: only what it adds counts.
        added = taken[len(before or "") :]
        kind = "full" if taken == text else "partial"
        self.metrics.count(f"accepts.{kind}")
        self.metrics.count("accepted_chars", len(added))
        self.metrics.count(f"accepted_chars.{kind}", len(added))
        if added and self.on_taken is not None:
            self.on_taken(rec.uri, rec.doc_prefix + (before or ""), added, rec.eol)
        self.metrics.count("tokens.accepted", tokens.count(added) if added else 0)
        if kind == "partial":
            return None
        if rec.line_suffix.strip():
            return None  # text follows on the line: no next line to speculate
        accepted_prefix = rec.doc_prefix + text
        last_line = accepted_prefix[accepted_prefix.rfind("\n") + 1 :]
        return rec.uri, accepted_prefix + "\n" + next_line_indent(last_line), rec.doc_suffix, rec.language


def _once(seen: OrderedDict[int, None], key: int) -> bool:
    """True the first time ``key`` is added to ``seen`` (which keeps the last ``MAX_SHOWN``)."""
    if key in seen:
        return False
    seen[key] = None
    while len(seen) > MAX_SHOWN:
        seen.popitem(last=False)
    return True


def _first_line(text: str) -> str:
    body = text[1:] if text.startswith("\n") else text
    return ("\n" if text.startswith("\n") else "") + body.split("\n", 1)[0]
