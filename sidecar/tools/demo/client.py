"""The demo's LSP client: one session with a server process over stdio.

Built on pygls's ``LanguageClient``. It starts the server, negotiates UTF-16
positions and inline completion, sends document changes, times inline completion
requests and always stops the server process, whatever happened.
"""

from __future__ import annotations

import asyncio
import collections
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

CLIENT_NAME = "sidecar-demo"
UPDATE_METHOD = "sidecar/inlineCompletionUpdate"
STATUS_METHOD = "sidecar/status"


def plain(value: Any) -> Any:
    """Turn pygls's namedtuple view of an untyped JSON value back into dicts/lists."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


@dataclass
class Answer:
    """The outcome of one inline completion request.

    ``elapsed_ms`` runs from just before the request is written to the moment its
    answer (or failure) is seen, in milliseconds. ``items`` are the raw
    ``InlineCompletionItem`` objects; ``error`` is set when there was no answer.
    """

    elapsed_ms: float
    items: list[types.InlineCompletionItem] = field(default_factory=list)
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.error is None


class _Client(LanguageClient):
    """LanguageClient that remembers transport errors instead of dropping them."""

    def __init__(self) -> None:
        super().__init__(CLIENT_NAME, _version())
        self.transport_errors: list[str] = []

    def report_server_error(self, error: Exception, source: Any) -> None:
        self.transport_errors.append(f"{getattr(source, '__name__', source)}: {error}")


def _version() -> str:
    """The sidecar's own version (the package's, whatever the distribution is called:
    ``sidecar-lsp``, or none at all when run from a checkout without installing)."""
    from ... import __version__

    return __version__


class ServerSession:
    """A running LSP server and the one document the demo edits.

    ``on_message(kind, text)`` receives ``window/showMessage`` and ``sidecar/status``
    notifications (a status as one ``key=value`` line); ``on_status(params)`` also receives
    each ``sidecar/status`` payload as a plain dict (its ``model``, ``side``, ``health``...);
    ``on_log(text)`` receives ``window/logMessage`` texts (also kept in
    ``log_messages``); ``on_update(params)`` receives ``sidecar/inlineCompletionUpdate``
    params as a plain dict. All run on the event loop and must not block.
    """

    def __init__(
        self,
        on_message: Callable[[str, str], None] | None = None,
        on_update: Callable[[dict], None] | None = None,
        stderr_lines: int = 40,
        on_log: Callable[[str], None] | None = None,
        on_status: Callable[[Any], None] | None = None,
    ) -> None:
        self._on_message = on_message or (lambda kind, text: None)
        self._on_status = on_status or (lambda params: None)
        self._on_update = on_update or (lambda params: None)
        self._on_log = on_log or (lambda text: None)
        self.client = _Client()
        self.init_result: types.InitializeResult | None = None
        self.log_messages: collections.deque[str] = collections.deque(maxlen=200)
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=stderr_lines)
        self.uri: str | None = None
        self.version = 0
        self.full_sync = False
        self._full_text = ""
        self._stderr_task: asyncio.Task | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._register_handlers()

    # -- server-to-client traffic ---------------------------------------------------

    def _register_handlers(self) -> None:
        c = self.client

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def _show(params: types.ShowMessageParams) -> None:
            kind = types.MessageType(params.type).name.lower() if params.type else "info"
            self._on_message(kind, params.message)

        @c.feature(types.WINDOW_LOG_MESSAGE)
        def _log(params: types.LogMessageParams) -> None:
            self.log_messages.append(params.message)
            self._on_log(params.message)

        @c.feature(STATUS_METHOD)
        def _status(params: Any) -> None:
            payload = plain(params)
            self._on_status(payload)
            self._on_message("status", _format_status(payload))

        @c.feature(UPDATE_METHOD)
        def _update(params: Any) -> None:
            self._on_update(plain(params))

        # Requests a server may send; answer them the way a plain editor would.
        @c.feature(types.WORKSPACE_CONFIGURATION)
        def _configuration(params: types.ConfigurationParams) -> list[Any]:
            return [None for _ in params.items]

        @c.feature(types.CLIENT_REGISTER_CAPABILITY)
        def _register(params: Any) -> None:
            return None

        @c.feature(types.CLIENT_UNREGISTER_CAPABILITY)
        def _unregister(params: Any) -> None:
            return None

        @c.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def _progress_create(params: Any) -> None:
            return None

        @c.feature(types.WINDOW_SHOW_MESSAGE_REQUEST)
        def _show_request(params: types.ShowMessageRequestParams) -> None:
            self._on_message(
                types.MessageType(params.type).name.lower() if params.type else "info",
                params.message,
            )
            return None

        for method in (types.PROGRESS, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, types.TELEMETRY_EVENT):

            @c.feature(method)
            def _ignore(params: Any) -> None:
                return None

    async def _drain_stderr(self, stream: asyncio.StreamReader) -> None:
        # The server's stderr is a pipe that nobody else reads: without this, a
        # chatty server fills the pipe buffer and blocks.
        while True:
            line = await stream.readline()
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip())

    # -- lifecycle ------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        """True while the server process runs and the connection is open."""
        return self._process is not None and self._process.returncode is None and not self.client.stopped

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.returncode

    async def start(
        self,
        command: list[str],
        env: dict[str, str] | None = None,
        root_uri: str | None = None,
        timeout_s: float = 60.0,
    ) -> types.InitializeResult:
        """Start ``command`` and run the LSP handshake; raises on failure.

        ``env`` is the server's whole environment. ``timeout_s`` bounds the
        ``initialize`` request, in seconds.
        """
        # Own session: Ctrl-C in the terminal reaches only the demo, which then
        # shuts the server down properly (it may be running a local engine).
        extra = {"start_new_session": True} if os.name == "posix" else {}
        await self.client.start_io(command[0], *command[1:], env=env, **extra)
        self._process = self.client._server  # pygls keeps the process here
        if self._process is not None and self._process.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain_stderr(self._process.stderr))
        params = types.InitializeParams(
            process_id=os.getpid(),
            client_info=types.ClientInfo(name=CLIENT_NAME, version=_version()),
            root_uri=root_uri,
            workspace_folders=(
                [types.WorkspaceFolder(uri=root_uri, name=root_uri.rsplit("/", 1)[-1])] if root_uri else None
            ),
            capabilities=types.ClientCapabilities(
                general=types.GeneralClientCapabilities(
                    position_encodings=[types.PositionEncodingKind.Utf16],
                ),
                text_document=types.TextDocumentClientCapabilities(
                    synchronization=types.TextDocumentSyncClientCapabilities(dynamic_registration=False),
                    inline_completion=types.InlineCompletionClientCapabilities(dynamic_registration=False),
                ),
                window=types.WindowClientCapabilities(
                    work_done_progress=True,
                    show_message=types.ShowMessageRequestClientCapabilities(),
                ),
                workspace=types.WorkspaceClientCapabilities(configuration=False),
                # Tells a server that this client renders sidecar/inlineCompletionUpdate.
                experimental={"sidecar": {"inlineCompletionUpdate": True}},
            ),
        )
        result = await asyncio.wait_for(self.client.initialize_async(params), timeout_s)
        self.init_result = result
        self.full_sync = _sync_kind(result) == types.TextDocumentSyncKind.Full
        self.client.initialized(types.InitializedParams())
        return result

    @property
    def position_encoding(self) -> str:
        """The encoding the server chose (LSP default: utf-16)."""
        enc = self.init_result and self.init_result.capabilities.position_encoding
        return str(getattr(enc, "value", enc) or "utf-16")

    @property
    def has_inline_completion(self) -> bool:
        caps = self.init_result and self.init_result.capabilities
        return bool(caps and caps.inline_completion_provider)

    async def close(self, timeout_s: float = 5.0) -> None:
        """Close the document, shut the server down and make sure its process ends.

        Polite first (``shutdown`` then ``exit``), then SIGTERM, then SIGKILL; each
        step waits at most ``timeout_s`` seconds. A server that never finished
        ``initialize`` is not asked politely. Never raises.
        """
        steps: tuple[str, ...] = ("terminate", "kill")
        if self.alive and self.init_result is not None:
            steps = ("wait", "terminate", "kill")
            try:
                if self.uri is not None:
                    self.client.text_document_did_close(
                        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=self.uri))
                    )
                await asyncio.wait_for(self.client.shutdown_async(None), timeout_s)
                self.client.exit(None)
            except Exception:
                pass
        if self._process is not None:
            await end_process(self._process, steps, timeout_s)
        try:
            await asyncio.wait_for(self.client.stop(), timeout_s)
        except Exception:
            pass
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 1.0)
            except Exception:
                self._stderr_task.cancel()

    # -- document -------------------------------------------------------------------

    def open(self, uri: str, language_id: str, text: str) -> None:
        """Send ``textDocument/didOpen`` with ``text`` as version 1."""
        self.uri, self.version, self._full_text = uri, 1, text
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id=language_id, version=1, text=text)
            )
        )

    def insert(self, line: int, character: int, text: str, offset: int) -> int:
        """Send one keystroke as ``textDocument/didChange`` and return the new version.

        ``line``/``character`` is the LSP position (UTF-16 units) where ``text`` goes,
        ``offset`` the same place as a code-point index (kept for full-sync servers).
        """
        assert self.uri is not None, "open a document first"
        self.version += 1
        self._full_text = self._full_text[:offset] + text + self._full_text[offset:]
        if self.full_sync:
            change: types.TextDocumentContentChangeEvent = types.TextDocumentContentChangeWholeDocument(
                text=self._full_text
            )
        else:
            at = types.Position(line=line, character=character)
            change = types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=text)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.uri, version=self.version),
                content_changes=[change],
            )
        )
        return self.version

    @property
    def text(self) -> str:
        """The document text as the server should now have it."""
        return self._full_text

    # -- inline completion ------------------------------------------------------------

    async def server_stats(self, timeout_s: float = 5.0) -> dict[str, Any] | None:
        """The server's ``sidecar.stats`` figures (``None`` when it has no such command or fails)."""
        try:
            out = await asyncio.wait_for(
                self.client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats")),
                timeout_s,
            )
        except Exception:  # noqa: BLE001 - another server, or a dead one
            return None
        return plain(out) if out is not None else None

    async def inline_completion(
        self,
        line: int,
        character: int,
        trigger: types.InlineCompletionTriggerKind = types.InlineCompletionTriggerKind.Automatic,
        timeout_s: float = 60.0,
    ) -> Answer:
        """Request inline completions at ``line:character`` (UTF-16) and time the answer.

        Never raises for server trouble: a timeout (after ``timeout_s`` seconds, when
        ``$/cancelRequest`` is sent as an editor would), an error response or a dead
        server comes back as ``Answer.error``.
        """
        assert self.uri is not None, "open a document first"
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self.uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=trigger),
        )
        # Same call as client.text_document_inline_completion_async, but with our own
        # request id so that a timed-out request can be cancelled.
        msg_id = f"demo-{uuid.uuid4().hex[:12]}"
        started = time.perf_counter()
        try:
            if self.client.stopped:
                raise RuntimeError("the server connection is closed")
            future = self.client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
            )
        except Exception as exc:
            return Answer((time.perf_counter() - started) * 1000.0, error=_describe(exc))
        # A late answer after a timeout must not be reported as "never retrieved".
        future.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            result = await asyncio.wait_for(asyncio.shield(future), timeout_s)
        except TimeoutError:
            elapsed = (time.perf_counter() - started) * 1000.0
            try:
                self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            except Exception:
                pass
            return Answer(elapsed, error=f"no answer within {timeout_s:g} s (request cancelled)")
        except Exception as exc:
            return Answer((time.perf_counter() - started) * 1000.0, error=_describe(exc))
        elapsed = (time.perf_counter() - started) * 1000.0
        if result is None:
            items: list[types.InlineCompletionItem] = []
        elif isinstance(result, types.InlineCompletionList):
            items = list(result.items)
        else:
            items = list(result)
        return Answer(elapsed, items=items)


def _sync_kind(result: types.InitializeResult) -> types.TextDocumentSyncKind | None:
    sync = result.capabilities.text_document_sync
    if isinstance(sync, types.TextDocumentSyncOptions):
        return sync.change
    return sync


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    text = str(exc) or type(exc).__name__
    return f"error {code}: {text}" if code is not None else text


def _format_status(params: Any) -> str:
    if isinstance(params, dict):
        parts = []
        for key, value in params.items():
            if isinstance(value, float):
                value = f"{value:.0f}" if abs(value) >= 10 else f"{value:.2g}"
            parts.append(f"{key}={value}")
        return " ".join(parts)
    return str(params)


async def end_process(proc: asyncio.subprocess.Process, steps: tuple[str, ...], timeout_s: float) -> None:
    """Make sure ``proc`` ends: for each of ``steps`` (``wait``, ``terminate``, ``kill``)
    until it has, do it and wait up to ``timeout_s`` seconds. Never raises."""
    for step in steps:
        if proc.returncode is not None:
            break
        try:
            if step == "terminate":
                proc.terminate()
            elif step == "kill":
                proc.kill()
            await asyncio.wait_for(proc.wait(), timeout_s)
        except (TimeoutError, ProcessLookupError):
            pass
