"""The LSP surface: document sync, ``textDocument/inlineCompletion``, commands, and the
``sidecar/*`` notifications (DESIGN.md §2).

Every request gets an answer: a suggestion list, or ``null`` when there is nothing to
show. Upstream failures become one ``window/showMessage`` per cause, never an LSP error
(VS Code shows errors to users). ``$/cancelRequest`` cancels the handler task (pygls),
which closes the upstream stream, and pygls answers -32800.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from .. import __version__
from ..backends.errors import BackendError
from ..completion.context import NotCompletable, build_context
from ..completion.scheduler import Request
from ..completion.service import CompletionService
from ..config import ConfigError, Settings, build, normalize
from .positions import InvalidPosition, offset_at, units_of

log = logging.getLogger(__name__)

CMD_ACCEPT = "sidecar.acceptCompletion"
CMD_TOGGLE_LOCAL = "sidecar.toggleLocalGpu"
CMD_SET_MODE = "sidecar.setMode"
CMD_STATS = "sidecar.stats"
CMD_CLEAR_CACHE = "sidecar.clearCache"
NOTIFY_UPDATE = "sidecar/inlineCompletionUpdate"
NOTIFY_STATUS = "sidecar/status"


class _Unanswerable:
    """Stands in for a message pygls could not structure (already answered with an error)."""

    jsonrpc = "unanswerable"


class SidecarProtocol(LanguageServerProtocol):
    """pygls' protocol, except that a request whose params do not match the LSP types
    (a negative line, a bad trigger kind, missing fields) is answered with -32602
    InvalidParams instead of being dropped unanswered (JSON-RPC 2.0 §5.1)."""

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, JsonRpcInternalError):
            if isinstance(data, dict) and "id" in data and isinstance(data.get("method"), str):
                err = JsonRpcInvalidParams(f"invalid params for {data['method']}")
                self._send_response(data["id"], error=err.to_response_error())
                return _Unanswerable()
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Unanswerable):
            return
        super().handle_message(message)


class SidecarServer(LanguageServer):
    """pygls server holding the settings layers and the completion service."""

    def __init__(self, base_layers: list[dict[str, Any]], startup_errors: list[str]) -> None:
        super().__init__(
            "sidecar", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=SidecarProtocol,
        )
        self.base_layers = base_layers
        self.startup_errors = startup_errors
        self.init_layer: dict[str, Any] = {}
        self.change_layer: dict[str, Any] = {}
        self.mode_layer: dict[str, Any] = {}
        self.service: CompletionService | None = None

    # -------------------------------------------------------------- helpers
    def settings(self) -> Settings:
        return build(*self.base_layers, self.init_layer, self.change_layer, self.mode_layer)

    def show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"sidecar: {message}"))

    def on_backend_error(self, err: BackendError) -> None:
        self.show(types.MessageType.Error if err.kind in ("bad_key", "model_not_found", "engine") else types.MessageType.Warning, err.message)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log protocol-level garbage (malformed notifications and the like) to stderr; an
        editor popup for it would only confuse the user."""
        log.warning("ignored a message the server could not handle: %s", error)

    def send_status(self, payload: dict[str, Any]) -> None:
        self.protocol.notify(NOTIFY_STATUS, payload)


def create_server(base_layers: list[dict[str, Any]], startup_errors: list[str]) -> SidecarServer:
    """Build the server with every feature registered. ``base_layers`` are the config-file
    and environment layers; ``startup_errors`` are messages to show once initialized."""
    server = SidecarServer(base_layers, startup_errors)

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: SidecarServer, params: types.InitializeParams) -> None:
        opts = params.initialization_options
        if isinstance(opts, dict):
            ls.init_layer = normalize(opts, "initializationOptions", ls.startup_errors)
        elif opts is not None:
            ls.startup_errors.append(f"initializationOptions must be an object, got {type(opts).__name__}")
        try:
            ls.settings()
        except ConfigError as exc:
            ls.startup_errors.append(str(exc))
            ls.init_layer = {}

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: SidecarServer, _params: types.InitializedParams) -> None:
        for msg in ls.startup_errors:
            ls.show(types.MessageType.Error, msg + " (using the previous or default value)")
        ls.startup_errors.clear()
        try:
            settings = ls.settings()
        except ConfigError as exc:  # contradicting values across the base layers
            ls.show(types.MessageType.Error, f"{exc} (using the defaults)")
            ls.base_layers = [{}, {}]
            settings = ls.settings()
        logging.getLogger("sidecar").setLevel(settings.log_level.upper())
        ls.service = CompletionService(
            settings, on_error=ls.on_backend_error, on_status=ls.send_status,
            on_update=lambda req, text, done, seq: send_update(ls, req, text, done, seq),
        )
        log.info("backend: %s, model %s", ls.service.backend.name, ls.service.backend.model)
        await ls.service.start()
        if settings.prometheus_port:
            try:
                from ..observability.prometheus import start_exporter

                ls.exporter = start_exporter(ls.service.metrics, settings.prometheus_port)
                log.info("Prometheus metrics on http://127.0.0.1:%d/metrics", settings.prometheus_port)
            except OSError as exc:
                ls.show(types.MessageType.Warning, f"cannot serve Prometheus metrics on port {settings.prometheus_port}: {exc}")
        ls.stats_task = asyncio.ensure_future(_write_stats_forever(ls))

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_config(ls: SidecarServer, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if not isinstance(raw, dict):
            return
        errors: list[str] = []
        layer = normalize(raw, "workspace/didChangeConfiguration", errors)
        for msg in errors:
            ls.show(types.MessageType.Error, f"{msg} (kept the previous value)")
        # A key that failed keeps the value it had in the previous change, if any.
        bad = {k for k in ls.change_layer if k not in layer}
        previous = ls.change_layer
        ls.change_layer = {**{k: previous[k] for k in bad if errors}, **layer}
        try:
            ls.settings()
        except ConfigError as exc:
            ls.show(types.MessageType.Error, f"{exc} (kept the previous settings)")
            ls.change_layer = previous
            return
        if ls.service is not None:
            await ls.service.apply_settings(ls.settings())

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(ls: SidecarServer, params: types.DidChangeTextDocumentParams) -> None:
        if ls.service is not None:
            ls.service.on_keystroke()
            ls.service.scheduler.keystroke(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def on_close(ls: SidecarServer, params: types.DidCloseTextDocumentParams) -> None:
        if ls.service is not None:
            ls.service.scheduler.close_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def on_inline_completion(ls: SidecarServer, params: types.InlineCompletionParams) -> types.InlineCompletionList | None:
        try:
            return await _inline_completion(ls, params)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never let one request break the session
            log.exception("inline completion failed")
            return None

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: SidecarServer, _params: None) -> None:
        if ls.service is not None:
            await ls.service.aclose()

    @server.command(CMD_ACCEPT)
    def on_accept(ls: SidecarServer, *args: Any) -> None:
        """Arguments: ``[item id, accepted UTF-16 units]``; a client that reports a partial
        accept sends fewer units than the item's text has."""
        if ls.service is None:
            return
        item_id = args[0] if args and isinstance(args[0], str) else ""
        chars = args[1] if len(args) > 1 and isinstance(args[1], int) and not isinstance(args[1], bool) else None
        ls.service.scheduler.accepted(item_id, chars)

    @server.command(CMD_STATS)
    async def on_stats(ls: SidecarServer, *_args: Any) -> dict[str, Any]:
        return await stats_payload(ls)

    @server.command(CMD_SET_MODE)
    async def on_set_mode(ls: SidecarServer, *args: Any) -> dict[str, Any]:
        mode = args[0] if args else None
        if mode not in ("cloud", "local", "auto"):
            raise JsonRpcInvalidParams(f"sidecar.setMode takes 'cloud', 'local' or 'auto', got {mode!r}")
        return await _switch_mode(ls, mode)

    @server.command(CMD_TOGGLE_LOCAL)
    async def on_toggle(ls: SidecarServer, *_args: Any) -> dict[str, Any]:
        current = ls.settings().resolved_mode
        return await _switch_mode(ls, "cloud" if current == "local" else "local")

    @server.command(CMD_CLEAR_CACHE)
    async def on_clear_cache(ls: SidecarServer, *_args: Any) -> dict[str, Any]:
        if ls.service is None or ls.service.cache is None:
            return {"cleared": 0, "enabled": False}
        ls.service.scheduler.forget_streams()
        return {"cleared": await ls.service.cache.clear(), "enabled": True}

    return server


async def stats_payload(ls: SidecarServer) -> dict[str, Any]:
    """What ``sidecar.stats`` returns (and the stats file holds): counters, latency
    percentiles in ms, cache, acceptance, prefetch and runtime figures."""
    if ls.service is None:
        return {"ready": False}
    snap = ls.service.metrics.snapshot()
    snap["cache"] = await ls.service.cache.stats() if ls.service.cache else {"enabled": False}
    c = snap["counters"]
    shown = c.get("suggestions.shown", 0)
    snap["acceptance"] = {
        "shown": shown,
        "accepted": c.get("accepted", 0),
        "accepted_chars": c.get("accepted_chars", 0),
        "rate": (c.get("accepted", 0) / shown) if shown else None,
    }
    snap["prefetch"] = {k.split(".", 1)[1]: v for k, v in c.items() if k.startswith("prefetch.")}
    snap["status"] = ls.service.status("ready")
    snap["runtime"] = {
        "tasks": len(asyncio.all_tasks()),
        **ls.service.scheduler.snapshot(),
        "busy_connections": ls.service.busy_connections(),
    }
    return snap


async def _write_stats_forever(ls: SidecarServer, every_s: float = 2.0) -> None:
    """Keep ``<state dir>/sidecar/stats/<pid>.json`` current for ``sidecar stats``."""
    from ..observability import statsfile

    last = None
    while True:
        try:
            snap = await stats_payload(ls)
            counters = snap.get("counters")
            if counters != last:
                statsfile.write(os.getpid(), snap)
                last = dict(counters or {})
        except Exception:  # noqa: BLE001 - stats are best effort
            log.debug("stats file update failed", exc_info=True)
        await asyncio.sleep(every_s)



async def _switch_mode(ls: SidecarServer, mode: str) -> dict[str, Any]:
    """Switch between the cloud backend, the local engine and ``auto`` at run time. Open
    documents are kept; the old backend's streams are closed; cache keys carry backend and
    model, so results never mix; ``sidecar/status`` tells the editor."""
    layer = {"mode": mode}
    candidate = build(*ls.base_layers, ls.init_layer, ls.change_layer, layer)
    if mode in ("cloud", "auto") and candidate.cloud_provider is None:
        msg = f"{mode} mode needs a cloud backend (SILICONFLOW_API_KEY or SIDECAR_BASE_URL); staying in local mode"
        ls.show(types.MessageType.Warning, msg)
        return {"mode": "local", "changed": False, "message": msg}
    ls.mode_layer = layer
    changed = await ls.service.apply_settings(ls.settings()) if ls.service else False
    status = ls.service.status("starting" if changed else "ready") if ls.service else {}
    return {**status, "mode": mode, "changed": changed}


async def _inline_completion(ls: SidecarServer, params: types.InlineCompletionParams) -> types.InlineCompletionList | None:
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
    encoding = str(ls.workspace.position_encoding or "utf-16")
    pos = params.position
    try:
        offset = offset_at(text, pos.line, pos.character, encoding)
    except InvalidPosition as exc:
        log.warning("invalid position %s:%s in %s: %s", pos.line, pos.character, params.text_document.uri, exc)
        service.metrics.count("invalid_position")
        return None

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

    settings = service.settings
    try:
        ctx = build_context(text, offset, doc.language_id or "", settings.prefix_tokens, settings.suffix_tokens,
                            cursor_line=pos.line if selected is None else None)
    except NotCompletable as exc:
        log.info("no completion: %s", exc)
        service.metrics.count("not_completable")
        return None

    invoked = bool(params.context and params.context.trigger_kind == types.InlineCompletionTriggerKind.Invoked)
    upstream_ms = wait_ms = 0.0
    if settings.scheduling == "naive":
        result = await service.complete(ctx)
        if result is None:
            return None
        completion_text, upstream_ms, wait_ms = result.text, result.upstream_ms, result.wait_ms
    else:
        req = Request(
            uri=params.text_document.uri, version=doc.version or 0, ctx=ctx,
            doc_prefix=_normalize(text[:offset], ctx.eol), doc_suffix=_normalize(text[offset:], ctx.eol),
            invoked=invoked, place=_LspPlace(replace_range, lead, encoding, ctx.eol),
        )
        answer = await service.scheduler.request(req)
        if answer is None:
            return None
        completion_text = answer.text
        service.metrics.count(f"answers.{answer.source}")
        wait_ms = req.waited_s * 1000
    item_id = service.new_id()
    handler_ms = (time.perf_counter() - t0) * 1000
    service.metrics.observe("time_to_suggestion", handler_ms)
    # Time spent in the sidecar itself: all but waiting on the backend and the debounce.
    service.metrics.observe("sidecar_overhead", max(0.0, handler_ms - upstream_ms - wait_ms))
    if settings.scheduling != "naive":
        service.scheduler.shown(item_id, req, completion_text)
    return types.InlineCompletionList(items=[_item(completion_text, lead, replace_range, ctx.eol, encoding, item_id)])


class _LspPlace:
    """Where a request's text goes in the editor (for update notifications)."""

    def __init__(self, replace_range: types.Range, lead: str, encoding: str, eol: str) -> None:
        self.range = replace_range
        self.lead = lead
        self.encoding = encoding
        self.eol = eol


def _normalize(text: str, eol: str) -> str:
    return text if eol == "\n" else text.replace("\r\n", "\n").replace("\r", "\n")


def _item(text: str, lead: str, replace_range: types.Range, eol: str, encoding: str, item_id: str) -> types.InlineCompletionItem:
    insert = lead + text
    if eol != "\n":
        insert = insert.replace("\n", eol)
    return types.InlineCompletionItem(
        insert_text=insert,
        range=replace_range,
        command=types.Command(title="Accept suggestion", command=CMD_ACCEPT, arguments=[item_id, units_of(text, encoding)]),
    )


def send_update(ls: SidecarServer, req: Request, text: str, done: bool, seq: int) -> None:
    """``sidecar/inlineCompletionUpdate``: the growing suggestion of the document's latest
    request. ``version`` is the LSP document version the request was made at, ``seq``
    counts updates of that request from 1, ``items`` is empty when nothing is left."""
    place: _LspPlace = req.place
    items = []
    if text:
        item = _item(text, place.lead, place.range, place.eol, place.encoding, f"u{req.id}.{seq}")
        items.append(ls.protocol._converter.unstructure(item))
    ls.protocol.notify(NOTIFY_UPDATE, {
        "uri": req.uri,
        "version": req.version,
        "position": {"line": place.range.end.line, "character": place.range.end.character},
        "requestId": req.id,
        "seq": seq,
        "items": items,
        "done": done,
    })
