"""The LSP surface: registers document sync, ``textDocument/inlineCompletion``
(``inline.py``), the ``sidecar.*`` commands (``commands.py``) and the ``sidecar/*``
notifications (docs/operations.md "Protocol"; docs/architecture.md).

Every request gets an answer: a suggestion list, or ``null`` when there is nothing to
show. Upstream failures become one ``window/showMessage`` per cause, never an LSP error
(VS Code shows errors to users). ``$/cancelRequest`` cancels the handler task (pygls),
which closes the upstream stream, and pygls answers -32800.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..backends.errors import USER_MUST_ACT, BackendError
from ..completion.crossfile import CrossFileContext
from ..completion.crossfile.exclusion import ContentExclusion
from ..completion.crossfile.workspace import WorkspaceIndex
from ..completion.service import CompletionService
from ..config import ConfigError, Settings, build, config_file_path, normalize, refused_base_url, settle
from ..config.load import URL_ERROR
from ..observability.redact import redact
from . import client_log, workspace_events
from .commands import stats_payload, switch_mode, write_stats_forever
from .documents import encoding_name
from .inline import CMD_ACCEPT, NOTIFY_SHOWN, HandedOut, inline_completion, send_update
from .negotiation import client_renders_updates, without_updates_option
from .positions import offset_at
from .progress import LoadProgress
from .protocol import SidecarProtocol, echo

log = logging.getLogger(__name__)

CMD_TOGGLE_LOCAL = "sidecar.toggleLocalGpu"
CMD_SET_MODE = "sidecar.setMode"
CMD_STATS = "sidecar.stats"
CMD_CLEAR_CACHE = "sidecar.clearCache"
NOTIFY_STATUS = "sidecar/status"


class SidecarServer(LanguageServer):
    """pygls server holding the settings layers and the completion service."""

    protocol: SidecarProtocol  # protocol_cls below

    def __init__(self, base_layers: list[dict[str, Any]], startup_errors: list[str]) -> None:
        super().__init__(
            "sidecar",
            __version__,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            protocol_cls=SidecarProtocol,
        )
        self.base_layers = base_layers
        self.startup_errors = startup_errors
        self.init_layer: dict[str, Any] = {}
        self.change_layer: dict[str, Any] = {}
        self.mode_layer: dict[str, Any] = {}
        self.service: CompletionService | None = None
        self.load_progress = LoadProgress(self)
        # Whether the client renders inline.NOTIFY_UPDATE (see ``client_renders_updates``).
        self.client_updates = False
        # The workspace index (completion/crossfile/workspace.py; its events: workspace_events.py).
        # Content exclusion (completion/crossfile/exclusion.py): .sidecarignore files and
        # the ignore_paths setting; folders and patterns are applied by workspace_events.apply.
        self.exclusion = ContentExclusion(config_file_path().parent)
        self.index = WorkspaceIndex(busy=self._busy, open_text=self._open_path_text, excluded=self.exclusion.excluded)
        self.index_enabled = False  # the workspace_index setting, applied (workspace_events.apply)
        self.watch_registered = False
        # Other open documents' recent edits and definitions, and the workspace index's
        # definitions, outlines and similar code, for prompts (completion/crossfile/).
        self.crossfile = CrossFileContext(
            lambda: self.workspace.text_documents,
            lambda: self.workspace.root_path,
            index=self.index,
            index_on=lambda: self.index_enabled,
            excluded=self.exclusion.excluded,
        )
        self.exporter: object | None = None  # the Prometheus endpoint, when prometheus_port is set
        self.stats_task: asyncio.Task[None] | None = None  # write_stats_forever
        self.handed_out = HandedOut()  # the items handed out lately (inline.py), to read accepts back

    # -------------------------------------------------------------- helpers
    def _busy(self) -> bool:
        """A stream is running (the index pauses between files; any thread may ask)."""
        service = self.service
        try:
            return service is not None and service.scheduler.active_streams() > 0
        except Exception:  # noqa: BLE001 - asked from the index thread while the service changes
            return False

    def _open_path_text(self, path: str) -> str | None:
        """The text of the open document at file ``path`` (None when not open)."""
        try:
            doc = self.workspace.text_documents.get(unquote(Path(path).as_uri()))
        except (RuntimeError, ValueError):
            return None
        return doc.source if doc is not None else None

    def settings(self) -> Settings:
        return build(*self.base_layers, self.init_layer, self.change_layer, self.mode_layer)

    def show(self, kind: types.MessageType, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"sidecar: {redact(message)}"))

    def on_backend_error(self, err: BackendError) -> None:
        error = err.permanent or err.kind in USER_MUST_ACT
        self.show(types.MessageType.Error if error else types.MessageType.Warning, err.message)

    def log_notice(self, message: str) -> None:
        """A notice that needs no action (engine restarts): ``window/logMessage``."""
        self.window_log_message(
            types.LogMessageParams(type=types.MessageType.Info, message=f"sidecar: {redact(message)}")
        )

    def on_progress(self, kind: str, message: str) -> None:
        if kind == "begin":
            self.load_progress.begin(message)
        else:
            self.load_progress.end(message)

    def report_server_error(self, error: Exception, source: object) -> None:
        """Log protocol-level garbage (malformed notifications and the like) to stderr; an
        editor popup for it would only confuse the user."""
        log.warning("ignored a message the server could not handle: %s", error)

    def send_status(self, payload: dict[str, Any]) -> None:
        self.protocol.notify(NOTIFY_STATUS, payload)


def create_server(base_layers: list[dict[str, Any]], startup_errors: list[str]) -> SidecarServer:
    """Build the server with every feature registered. ``base_layers`` are the config-file
    and environment layers; ``startup_errors`` are messages to show once initialized.
    Settings of theirs that contradict each other drop only themselves, the config
    file's before the environment's (``config.settle``)."""
    base_layers = settle(base_layers, startup_errors, names=(f"config file {config_file_path()}", "the environment"))
    server = SidecarServer(base_layers, startup_errors)

    @server.feature(types.INITIALIZE)
    def on_initialize(ls: SidecarServer, params: types.InitializeParams) -> None:
        opts = params.initialization_options
        ls.client_updates = client_renders_updates(params)
        if isinstance(opts, dict):
            opts = without_updates_option(opts)
            ls.init_layer = normalize(opts, "initializationOptions", ls.startup_errors)
        elif opts is not None:
            ls.startup_errors.append(f"initializationOptions must be an object, got {type(opts).__name__}")
        try:  # a contradiction there drops only its settings from initializationOptions
            ls.init_layer = settle(
                [*ls.base_layers, ls.init_layer],
                ls.startup_errors,
                names=(*[""] * len(ls.base_layers), "initializationOptions"),
                fixed=len(ls.base_layers),
            )[-1]
        except ConfigError as exc:
            ls.startup_errors.append(str(exc))
            ls.init_layer = {}

    @server.feature(types.INITIALIZED)
    async def on_initialized(ls: SidecarServer, _params: types.InitializedParams) -> None:
        try:
            settings = ls.settings()
        except ConfigError as exc:  # not after settle(): a last resort
            last_resort: str | None = f"{exc} (using the defaults)"
            ls.base_layers = [{}, {}]
            settings = ls.settings()
        else:
            last_resort = None
        for msg in ls.startup_errors:
            # An invalid base URL leaves no cloud backend (its key goes nowhere else): say so.
            ls.show(
                types.MessageType.Error,
                refused_base_url(msg, settings) or msg + " (using the previous or default value)",
            )
        ls.startup_errors.clear()
        if last_resort is not None:
            ls.show(types.MessageType.Error, last_resort)
        logging.getLogger("sidecar").setLevel(settings.log_level.upper())
        client_log.install(ls)  # SIDECAR_LOG_TO_CLIENT=1: log records as window/logMessage
        ls.service = CompletionService(
            settings,
            on_error=ls.on_backend_error,
            on_status=ls.send_status,
            on_update=lambda req, text, done, seq: send_update(ls, req, text, done, seq),
            on_log=ls.log_notice,
            on_progress=ls.on_progress,
            crossfile=ls.crossfile,
            text_of=lambda uri: _open_text(ls, uri),
        )
        log.info("backend: %s, model %s", ls.service.backend.name, ls.service.backend.model)
        if settings.provider_note and settings.resolved_mode != "local":
            log.warning("provider: %s", settings.provider_note)
        await ls.service.start()
        if settings.prometheus_port:
            try:
                from ..observability.prometheus import start_exporter

                ls.exporter = start_exporter(ls.service.metrics, settings.prometheus_port)
                log.info("Prometheus metrics on http://127.0.0.1:%d/metrics", settings.prometheus_port)
            except OSError as exc:
                ls.show(
                    types.MessageType.Warning,
                    f"cannot serve Prometheus metrics on port {settings.prometheus_port}: {exc}",
                )
        ls.stats_task = asyncio.ensure_future(write_stats_forever(ls))
        ls.exclusion.set_patterns(settings.ignore_paths)
        workspace_events.apply(ls, settings.workspace_index)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_config(ls: SidecarServer, params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if not isinstance(raw, dict):
            return
        errors: list[str] = []
        # Not a setting but a fact about the client, fixed at initialize: accepted, unused.
        layer = normalize(without_updates_option(raw), "workspace/didChangeConfiguration", errors)
        if layer.get(URL_ERROR) and ls.settings().base_url:
            # An invalid base URL keeps the valid one in use; only without one is there
            # no cloud backend (never the default host with a key meant for that URL).
            del layer[URL_ERROR]
        # A key that failed keeps the value it had in the previous change, if any.
        bad = {k for k in ls.change_layer if k not in layer}
        previous = ls.change_layer
        ls.change_layer = {**{k: previous[k] for k in bad if errors}, **layer}
        try:
            settings = ls.settings()
        except ConfigError as exc:
            for msg in errors:
                ls.show(types.MessageType.Error, f"{msg} (kept the previous value)")
            ls.show(types.MessageType.Error, f"{exc} (kept the previous settings)")
            ls.change_layer = previous
            return
        for msg in errors:
            ls.show(types.MessageType.Error, refused_base_url(msg, settings) or f"{msg} (kept the previous value)")
        if ls.service is not None:
            await ls.service.apply_settings(settings)
        ls.exclusion.set_patterns(settings.ignore_paths)
        if settings.workspace_index != ls.index_enabled:
            workspace_events.apply(ls, settings.workspace_index)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def on_change(ls: SidecarServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.crossfile.record_change(params.text_document.uri, params.content_changes)
        workspace_events.opened_or_changed(ls, params.text_document.uri)
        if ls.service is not None:
            ls.service.keystroke(params.text_document.uri)
            encoding = encoding_name(ls.workspace.position_encoding)
            ls.service.retention.changed(
                params.text_document.uri,
                params.content_changes,
                lambda text, line, character: offset_at(text, line, character, encoding),
            )

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def on_close(ls: SidecarServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.crossfile.closed(params.text_document.uri)
        workspace_events.from_disk(ls, params.text_document.uri)
        if ls.service is not None:
            ls.service.close_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def on_inline_completion(
        ls: SidecarServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList | None:
        try:
            return await inline_completion(ls, params)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - never let one request break the session
            log.exception("inline completion failed")
            return None

    @server.feature(types.SHUTDOWN)
    async def on_shutdown(ls: SidecarServer, _params: None) -> None:
        ls.index.stop()
        if ls.service is not None:
            await ls.service.aclose()

    @server.command(CMD_ACCEPT)
    def on_accept(ls: SidecarServer, *args: object) -> None:
        """Arguments: ``[item id, units taken]``: the code units (in the negotiated
        position encoding, UTF-16 by default) of the item's ``insertText`` taken so far
        from its start; a client that reports a partial accept sends fewer than the
        item's command carries. They become characters of the suggestion here
        (``inline.HandedOut``)."""
        if ls.service is None:
            return
        item_id = args[0] if args and isinstance(args[0], str) else ""
        units = args[1] if len(args) > 1 else None
        if units is not None and (not isinstance(units, int) or isinstance(units, bool) or units < 0):
            log.warning(
                "sidecar.acceptCompletion: the accepted length must be a count of code units "
                "(an integer >= 0), got %s; counted as a whole accept",
                echo(units),
            )
            units = None
        chars = ls.handed_out.taken_chars(item_id, units) if units is not None else None
        if units is not None and chars is None:
            chars = units  # an item not handed out here: acceptance counts it as unknown
        ls.service.accepted(item_id, chars)

    @server.feature(NOTIFY_SHOWN)
    def on_shown(ls: SidecarServer, params: object = None) -> None:
        """``{"id": item id}``: the editor displayed that item (docs/editors.md). A
        malformed notification is logged and dropped (a notification has no reply)."""
        item_id = _field(params, "id")
        if not isinstance(item_id, str):
            log.warning('%s: params must be {"id": item id}, got %s', NOTIFY_SHOWN, echo(params))
            return
        if ls.service is not None:
            ls.service.displayed(item_id)

    @server.command(CMD_STATS)
    async def on_stats(ls: SidecarServer, *_args: object) -> dict[str, Any]:
        return await stats_payload(ls)

    @server.command(CMD_SET_MODE)
    async def on_set_mode(ls: SidecarServer, *args: object) -> dict[str, Any]:
        mode = args[0] if args else None
        if mode not in ("cloud", "local", "auto"):
            # -32602, and one warning line (SidecarProtocol._send_handler_result): a
            # caller's typo is not a server error.
            shown = "no argument" if not args else echo(mode)  # a 100 kB argument is not echoed whole
            raise JsonRpcInvalidParams(f"sidecar.setMode takes 'cloud', 'local' or 'auto', got {shown}")
        return await switch_mode(ls, mode)

    @server.command(CMD_TOGGLE_LOCAL)
    async def on_toggle(ls: SidecarServer, *_args: object) -> dict[str, Any]:
        current = ls.settings().resolved_mode
        return await switch_mode(ls, "cloud" if current == "local" else "local")

    @server.command(CMD_CLEAR_CACHE)
    async def on_clear_cache(ls: SidecarServer, *_args: object) -> dict[str, Any]:
        if ls.service is None or ls.service.cache is None:
            return {"cleared": 0, "enabled": False}
        return {"cleared": await ls.service.clear_cache(), "enabled": True}

    workspace_events.register(server)
    return server


def _field(params: object, name: str) -> object:
    """A field of a custom notification's params (None when absent): pygls 2.1 hands
    them over as a namedtuple, another caller may pass a dict."""
    if isinstance(params, dict):
        return params.get(name)
    if isinstance(params, tuple) and name in getattr(params, "_fields", ()):
        return params[params._fields.index(name)]  # type: ignore[attr-defined]  # a namedtuple
    return None


def _open_text(ls: SidecarServer, uri: str) -> str | None:
    """The text of ``uri`` if the editor has it open (never read from disk)."""
    doc = ls.workspace.text_documents.get(unquote(uri))  # pygls keys documents by the unquoted URI
    return doc.source if doc is not None else None
