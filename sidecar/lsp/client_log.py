"""Server log records as ``window/logMessage`` at their own level, for clients that show
stderr lines all alike (VS Code's output channel marks every stderr line ``[error]``).

Turned on by ``SIDECAR_LOG_TO_CLIENT=1`` in the server's environment (the VS Code
extension sets it). Then records of the ``sidecar`` loggers go to the client with the
LSP message type of their level (Error, Warning, Info, Log for debug), redacted like
every other log line; they still reach the JSON-lines log file, and stderr keeps only
errors (and what happens before the client is connected). Records from other threads are handed to
the event loop; a record logged while one is being sent is dropped (no recursion).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any

from lsprotocol import types

from ..observability.redact import protect

ENV = "SIDECAR_LOG_TO_CLIENT"

_TYPES = (
    (logging.ERROR, types.MessageType.Error),
    (logging.WARNING, types.MessageType.Warning),
    (logging.INFO, types.MessageType.Info),
)


def message_type(levelno: int) -> types.MessageType:
    """The LSP message type for a logging level (DEBUG and below: Log)."""
    for level, kind in _TYPES:
        if levelno >= level:
            return kind
    return types.MessageType.Log


class ClientLogHandler(logging.Handler):
    """Sends each record as ``window/logMessage`` through ``server``."""

    def __init__(self, server: Any, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._server = server
        self._loop = loop
        self._sending = threading.local()
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(self._sending, "on", False):
            return
        try:
            params = types.LogMessageParams(type=message_type(record.levelno), message=self.format(record))
        except Exception:  # noqa: BLE001 - logging must never raise
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._send(params)
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._send, params)

    def _send(self, params: types.LogMessageParams) -> None:
        self._sending.on = True
        try:
            self._server.window_log_message(params)
        except Exception:  # noqa: BLE001 - the client may be gone
            pass
        finally:
            self._sending.on = False


def install(server: Any) -> bool:
    """With ``SIDECAR_LOG_TO_CLIENT=1``: route the ``sidecar`` loggers to the client and
    quiet stderr to errors. Returns True when it did."""
    if os.environ.get(ENV) != "1":
        return False
    handler = protect(ClientLogHandler(server, asyncio.get_running_loop()))
    logger = logging.getLogger("sidecar")
    if any(isinstance(h, ClientLogHandler) for h in logger.handlers):
        return True
    logger.addHandler(handler)
    # Records still reach the root's handlers (the JSON-lines log file); its stderr handler
    # keeps errors only.
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
            h.setLevel(max(h.level, logging.ERROR))
    return True
