"""LSP base-protocol frames as bytes, for the stdio reader's tests."""

from __future__ import annotations

import json


def body(msg: dict) -> bytes:
    return json.dumps(msg).encode()


def frame(msg: dict, length: int | None = None, name: bytes = b"Content-Length") -> bytes:
    """``msg`` framed with a ``name`` header that gives ``length`` (by default the true one)."""
    b = body(msg)
    return name + b": %d\r\n\r\n" % (len(b) if length is None else length) + b


def stats(msg_id: int) -> dict:
    """A request the server always answers: ``workspace/executeCommand sidecar.stats``."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "workspace/executeCommand",
        "params": {"command": "sidecar.stats"},
    }
