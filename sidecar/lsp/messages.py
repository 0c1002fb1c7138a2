"""Checking a framed JSON-RPC message before pygls sees it (JSON-RPC 2.0 §4, §5.1), so
that no malformed message gets a traceback or goes unanswered:

- a body that is not JSON (or not UTF-8) is answered -32700 Parse error, ``id`` null;
- a message that is not an object, a ``jsonrpc`` other than ``"2.0"``, a non-string
  ``method``, a request whose ``id`` is not an integer or a string (an object, an array,
  null, a boolean, a fraction), or a message with neither ``method`` nor ``result`` /
  ``error`` (``{"jsonrpc":"2.0","id":903}``) is answered -32600 Invalid Request, with
  the ``id`` when it is valid and null otherwise, and never a traceback;
- a response (``result`` or ``error``, no ``method``) is never answered; one without a
  usable ``id`` is logged and dropped;
- everything else goes to pygls' protocol (``structure_message`` on the top-level object
  only, then ``handle_message``), as pygls' own reader does.
"""

from __future__ import annotations

import logging
from typing import Any

from pygls.exceptions import JsonRpcException

from .framing import INVALID_REQUEST

log = logging.getLogger(__name__)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def envelope_problem(obj: Any) -> tuple[int | None, Any, str] | None:
    """What is wrong with a JSON-RPC message as a message, or None when nothing is.

    Returns ``(code, id, why)``: ``code`` is the error to answer with (-32600), or None
    when the message must not be answered (a broken response); ``id`` is the message's
    id when it is valid, else None."""
    if not isinstance(obj, dict):
        return INVALID_REQUEST, None, f"a message must be a JSON object, not {type(obj).__name__} (LSP has no batches)"
    has_id = "id" in obj
    msg_id = obj.get("id") if has_id and _valid_id(obj.get("id")) else None
    if "method" not in obj and ("result" in obj or "error" in obj):  # a response: never answered
        if obj.get("jsonrpc") != "2.0":
            return None, msg_id, 'a response whose "jsonrpc" is not "2.0"'
        if msg_id is None and not (obj.get("id") is None and "error" in obj):
            return None, None, f"a response with an unusable id {obj.get('id')!r}"
        return None
    if obj.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, msg_id, f'"jsonrpc" must be "2.0", got {obj.get("jsonrpc")!r}'
    if "method" not in obj:
        return INVALID_REQUEST, msg_id, "a request needs a method"
    if not isinstance(obj["method"], str):
        return INVALID_REQUEST, msg_id, "method must be a string"
    if has_id and msg_id is None:
        return INVALID_REQUEST, None, f"id must be an integer or a string, got {type(obj['id']).__name__}"
    return None


def send_error(protocol: Any, msg_id: Any, code: int, message: str) -> None:
    """A JSON-RPC error response; ``id`` null is written out (pygls' message type drops a
    None id, which JSON-RPC requires)."""
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})


def dispatch(server: Any, obj: Any) -> None:
    """Hand one parsed message to pygls, or answer it with an error ourselves."""
    protocol = server.protocol
    problem = envelope_problem(obj)
    if problem is not None:
        code, msg_id, why = problem
        log.warning("invalid JSON-RPC message: %s", why)
        if code is not None:
            send_error(protocol, msg_id, code, f"Invalid Request: {why}")
        return
    if isinstance(obj, dict) and "id" not in obj and "params" not in obj:
        # JSON-RPC 2.0 §4.1: a notification may omit its params; pygls' generic
        # notification type (custom methods such as sidecar/didShowCompletion) needs the key.
        obj = {**obj, "params": None}
    try:
        message = protocol.structure_message(obj)
        protocol.handle_message(message)
    except Exception as exc:  # noqa: BLE001 - one bad message must not stop the reader
        log.exception("unable to handle a message")
        server._report_server_error(exc, JsonRpcException)
