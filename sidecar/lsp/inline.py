"""``textDocument/inlineCompletion`` (LSP 3.18) in and out: from the editor's request to
a scheduler ``Request`` (position → string offset in the negotiated encoding, a selected
completion-menu item, the windows), and from the answer to an ``InlineCompletionItem``
(line breaks back to the document's, the accept command with UTF-16 units), plus the
``sidecar/inlineCompletionUpdate`` notification (docs/operations.md "Protocol"). See
docs/architecture.md.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Protocol

from lsprotocol import types

from ..completion.context import NotCompletable
from ..completion.request import Request
from ..completion.updates import update_item_id
from .documents import encoding_name
from .positions import InvalidPosition, line_bounds, offset_at, units_of

log = logging.getLogger(__name__)

#: Command an accepted item runs (arguments: item id, accepted UTF-16 units).
CMD_ACCEPT = "sidecar.acceptCompletion"
#: Notification with the growing suggestion of a request (docs/operations.md "Protocol").
NOTIFY_UPDATE = "sidecar/inlineCompletionUpdate"
#: Notification from the editor: it displayed an item (params ``{"id": item id}``,
#: docs/editors.md "What every editor tells the server").
NOTIFY_SHOWN = "sidecar/didShowCompletion"

if TYPE_CHECKING:
    from pygls.workspace import Workspace

    from ..completion.service import CompletionService
    from .protocol import SidecarProtocol

#: Ids of the items handed to the editor (``sidecar.acceptCompletion`` names one).
_item_ids = itertools.count(1)
#: Items handed out lately, by id: what the editor inserts for each, to read an accept's
#: units back (the oldest are forgotten first; acceptance.py keeps as many).
MAX_ITEMS = 256


class HandedOut:
    """The items handed to the editor lately: for each, the text the editor inserts
    (``insertText``: a completion-menu item's lead, then the suggestion with the
    document's line breaks) and the position encoding its units are counted in."""

    def __init__(self) -> None:
        self._items: OrderedDict[str, tuple[str, int, str, str]] = OrderedDict()

    def add(self, item_id: str, insert_text: str, lead: str, eol: str, encoding: str) -> None:
        self._items[item_id] = (insert_text, len(lead), eol, encoding)
        while len(self._items) > MAX_ITEMS:
            self._items.popitem(last=False)

    def taken_chars(self, item_id: str, units: int) -> int | None:
        """How many characters of the suggestion (``\n`` line breaks, no menu lead) an
        accept of ``units`` code units of item ``item_id``'s ``insertText`` took, in the
        position encoding the item was handed out in (LSP §Position): the editor counts
        what it inserted. None for an item not handed out here (or forgotten)."""
        rec = self._items.get(item_id)
        if rec is None:
            return None
        insert_text, lead_chars, eol, encoding = rec
        n = 0
        end = len(insert_text)
        for i, ch in enumerate(insert_text):
            if n >= units:
                end = i
                break
            n += units_of(ch, encoding)
        taken = insert_text[lead_chars:end]
        if eol != "\n":
            if eol == "\r\n" and taken.endswith("\r"):
                taken = taken[:-1]  # half a line break: not taken yet
            taken = taken.replace(eol, "\n")
        return len(taken)


class InlineServer(Protocol):
    """What this module needs of the language server (``server.SidecarServer``)."""

    service: CompletionService | None
    client_updates: bool  # the client renders NOTIFY_UPDATE
    handed_out: HandedOut  # the items handed out lately, to read accepts back

    @property
    def workspace(self) -> Workspace: ...

    @property
    def protocol(self) -> SidecarProtocol: ...


async def inline_completion(
    ls: InlineServer, params: types.InlineCompletionParams
) -> types.InlineCompletionList | None:
    t0 = time.perf_counter()
    service = ls.service
    if service is None:
        return None
    try:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        text = doc.source
    except Exception:  # noqa: BLE001 - unknown document
        log.warning("inline completion for a document that was never opened: %s", params.text_document.uri)
        return None
    encoding = encoding_name(ls.workspace.position_encoding)
    pos = params.position
    try:
        offset = offset_at(text, pos.line, pos.character, encoding)
    except InvalidPosition as exc:
        log.warning("invalid position %s:%s in %s: %s", pos.line, pos.character, params.text_document.uri, exc)
        service.metrics.count("invalid_position")
        return None
    # LSP §Position: a column past the line's end "defaults back to the line length". The
    # offset already is the line's end; the item's range (and an update's position) say so too.
    column = units_of(text[line_bounds(text, pos.line)[0] : offset], encoding)
    if column != pos.character:
        log.debug(
            "column %s past the end of line %s (%s units) in %s: taken as its end",
            pos.character,
            pos.line,
            column,
            params.text_document.uri,
        )
        pos = types.Position(line=pos.line, character=column)

    # A selected completion-menu item: the result must extend it and replace its range.
    selected = params.context.selected_completion_info if params.context else None
    replace_range = types.Range(start=pos, end=pos)
    lead = ""
    if selected is not None:
        try:
            start = offset_at(text, selected.range.start.line, selected.range.start.character, encoding)
        except InvalidPosition:
            start = -1
        if not 0 <= start <= offset:  # a range we cannot use: ignore the menu item
            log.info("ignored selectedCompletionInfo with an invalid range %s", selected.range)
            selected = None
    if selected is not None:
        lead = selected.text
        text = text[:start] + lead + text[offset:]
        offset = start + len(lead)
        replace_range = selected.range

    try:
        ctx = service.context_for(
            text, offset, doc.language_id or "", params.text_document.uri, pos.line, menu_item=selected is not None
        )
    except NotCompletable as exc:
        log.info("no completion: %s", exc)
        service.metrics.count("not_completable")
        return None

    invoked = bool(params.context and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked)
    req = Request(
        uri=params.text_document.uri,
        version=doc.version or 0,
        ctx=ctx,
        doc_prefix=_normalize(text[:offset], ctx.eol),
        doc_suffix=_normalize(text[offset:], ctx.eol),
        invoked=invoked,
        placement=ItemPlacement(replace_range, lead, encoding, ctx.eol),
        t0=t0,
        updates=ls.client_updates,
    )
    answer = await service.complete(req)
    if answer is None:
        return None
    item_id = f"c{next(_item_ids)}"
    service.shown(item_id, req, answer.text)
    item = _item(answer.text, lead, replace_range, ctx.eol, encoding, item_id)
    ls.handed_out.add(item_id, item.insert_text if isinstance(item.insert_text, str) else "", lead, ctx.eol, encoding)
    return types.InlineCompletionList(items=[item])


class ItemPlacement:
    """Where a request's text goes in the editor (for update notifications)."""

    def __init__(self, replace_range: types.Range, lead: str, encoding: str, eol: str) -> None:
        self.range = replace_range
        self.lead = lead
        self.encoding = encoding
        self.eol = eol


def _normalize(text: str, eol: str) -> str:
    return text if eol == "\n" else text.replace("\r\n", "\n").replace("\r", "\n")


def _item(
    text: str, lead: str, replace_range: types.Range, eol: str, encoding: str, item_id: str
) -> types.InlineCompletionItem:
    insert = lead + text
    if eol != "\n":
        insert = insert.replace("\n", eol)
    # The units are the whole insertText's, in the negotiated position encoding: what the
    # editor counts when it reports a partial accept (HandedOut.taken_chars).
    return types.InlineCompletionItem(
        insert_text=insert,
        range=replace_range,
        command=types.Command(
            title="Accept suggestion", command=CMD_ACCEPT, arguments=[item_id, units_of(insert, encoding)]
        ),
    )


def send_update(ls: InlineServer, req: Request, text: str, done: bool, seq: int) -> None:
    """``sidecar/inlineCompletionUpdate``: the growing suggestion of the document's latest
    request. ``version`` is the LSP document version the request was made at, ``seq``
    counts updates of that request from 1, ``items`` is empty when nothing is left."""
    placement = req.placement
    assert isinstance(placement, ItemPlacement)  # inline_completion set it on every request it made
    items = []
    if text:
        item_id = update_item_id(req.id, seq)
        item = _item(text, placement.lead, placement.range, placement.eol, placement.encoding, item_id)
        ls.handed_out.add(
            item_id,
            item.insert_text if isinstance(item.insert_text, str) else "",
            placement.lead,
            placement.eol,
            placement.encoding,
        )
        items.append(ls.protocol.to_json(item))
    ls.protocol.notify(
        NOTIFY_UPDATE,
        {
            "uri": req.uri,
            "version": req.version,
            "position": {"line": placement.range.end.line, "character": placement.range.end.character},
            "requestId": req.id,
            "seq": seq,
            "items": items,
            "done": done,
        },
    )
