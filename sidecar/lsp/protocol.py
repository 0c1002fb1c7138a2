"""pygls' protocol with the sidecar's guarantees (docs/architecture.md, "Rules of the
house"): a request with invalid params is answered (-32602), never dropped, and a
handler that rejects its arguments (``sidecar.setMode`` with a typo) is one warning line,
not an ERROR with a traceback, and echoes at most 80 characters of the value (``echo``); documents
apply edits as LSP says (``documents.py``); notification futures are not kept forever
(pygls 2.1.1, ``docs/upstream/pygls-2.1.1.md``); and no frame written to stdout carries a
registered secret. Frames are read by ``framing.py``, not by pygls' reader.
"""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcInternalError, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

from ..observability.redact import redact_registered_bytes
from ..observability.strictjson import strict_bytes
from .documents import DocumentsProtocolMixin

log = logging.getLogger(__name__)


#: The most characters of a caller's value that a message echoes (:func:`echo`).
ECHO_LIMIT = 80


def echo(value: Any, limit: int = ECHO_LIMIT) -> str:
    """``repr(value)`` for a message about a rejected request, cut to ``limit``
    characters with an ellipsis: a caller's 100,000-character argument is not sent back
    or logged whole."""
    return _cut(repr(value), limit)


#: The longest -32602 message sent or logged.
_MESSAGE_LIMIT = 300


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _QuietDeserialize(logging.Filter):
    """Drops pygls' ERROR-with-traceback for a message whose params do not match the LSP
    types: :meth:`SidecarProtocol.structure_message` answers it -32602 and logs one
    warning line instead (a client's bad input is not a server error)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietDeserialize())


class _Unanswerable:
    """Stands in for a message pygls could not structure (already answered with an error)."""

    jsonrpc = "unanswerable"


class SidecarProtocol(DocumentsProtocolMixin, LanguageServerProtocol):
    """pygls' protocol, except that a request whose params do not match the LSP types
    (a negative line, a bad trigger kind, missing fields) is answered with -32602
    InvalidParams instead of being dropped unanswered (JSON-RPC 2.0 §5.1), and that its
    documents apply edits as LSP says (``documents.py``). Frames are read by
    ``framing.py``, not by pygls' reader."""

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except (JsonRpcInvalidParams, JsonRpcInternalError):
            if isinstance(data, dict) and "id" in data and isinstance(data.get("method"), str):
                err = JsonRpcInvalidParams(f"invalid params for {_cut(data['method'], ECHO_LIMIT)}")
                log.warning("rejected a request (-32602): %s", err.message)
                self._send_response(data["id"], error=err.to_response_error())
                return _Unanswerable()
            log.warning(
                "ignored a message that does not match the LSP types: %s",
                _cut(str(data.get("method", "?")) if isinstance(data, dict) else "?", ECHO_LIMIT),
            )
            raise

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """A handler that rejected its request's arguments (``JsonRpcInvalidParams``:
        ``sidecar.setMode 'turbo'``, an unknown command) is answered -32602 with its
        message and logged as one warning line. pygls would log it as an ERROR with a
        traceback and report it as a server error: it is the caller's mistake."""
        exc = None if future.cancelled() else future.exception()
        if not isinstance(exc, JsonRpcInvalidParams):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        if len(exc.message) > _MESSAGE_LIMIT:  # whatever a handler put in it, no caller's value echoed whole
            exc = JsonRpcInvalidParams(_cut(exc.message, _MESSAGE_LIMIT))
        log.warning("rejected a request (-32602): %s", exc.message)
        self._send_response(msg_id, error=exc.to_response_error())

    def to_json(self, obj: Any) -> Any:
        """An lsprotocol object as plain JSON data (dicts, lists, camelCase keys), for a
        custom notification's payload (pygls' converter is private: only this module
        touches it)."""
        return self._converter.unstructure(obj)

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Unanswerable):
            return
        super().handle_message(message)

    def _execute_handler(self, msg_id: Any, handler: Any, callback: Any, args: Any = None, kwargs: Any = None) -> None:
        """pygls 2.1.1 files the future of every notification it handles with an async or
        generator handler (``didChange`` goes through a generator) under a fresh UUID in
        ``_request_futures`` and never removes it: ~1.7 KB per keystroke, without bound.
        Requests are removed when answered; notifications are removed here once done
        (nothing can cancel a notification, so nothing needs the entry)."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        if callback != self._check_handler_result:
            return  # a request: pygls pops it when it sends the answer
        future = self._request_futures.get(msg_id)
        if future is None:
            return
        if future.done():
            self._request_futures.pop(msg_id, None)
        else:
            futures = self._request_futures

            def forget(_f: object, key: Any = msg_id) -> None:
                futures.pop(key, None)

            future.add_done_callback(forget)

    def set_writer(self, writer: Any, *args: Any, **kwargs: Any) -> None:
        """The last net: no frame written to stdout carries a registered secret."""
        super().set_writer(_RedactingWriter(writer), *args, **kwargs)


class _RedactingWriter:
    """Writes each frame with the registered secrets (exact values only: completion text
    is never touched by a pattern) replaced, as strict JSON (pygls writes a float that is
    not finite as a bare ``NaN``, which strict parsers reject: it becomes ``null``,
    observability/strictjson.py), and its Content-Length fixed to match."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def write(self, data: bytes) -> Any:
        head, sep, body = data.partition(b"\r\n\r\n")
        if not sep:
            return self._writer.write(redact_registered_bytes(data))
        clean = strict_bytes(redact_registered_bytes(body))
        if clean is not body:
            lines = [
                b"Content-Length: %d" % len(clean) if ln.lower().startswith(b"content-length:") else ln
                for ln in head.split(b"\r\n")
            ]
            data = b"\r\n".join(lines) + sep + clean
        return self._writer.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)
