"""The stdin loop of ``sidecar serve``: bytes from stdin (read on a thread, so a blocked
read never delays exit) go through the ``Framer`` (``framing.py``); each message is
checked and dispatched (``messages.py``); a body that is not JSON gets -32700. The
process exits 0 when stdin closes or pygls' ``exit`` arrives after ``shutdown``, and 1
when the framing is lost (an editor restarts a dead server, never a deaf one). See
docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any, BinaryIO

from pygls.io_ import StdoutWriter

from .framing import PARSE_ERROR, READ_CHUNK, STALL_S, Framer
from .messages import dispatch, send_error

log = logging.getLogger(__name__)


class _Pump:
    """Reads stdin on a daemon thread (a blocked read never delays exit) into a queue.
    The file descriptor is read directly, without the buffered reader's lock."""

    def __init__(self, stdin: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop = loop
        self._stdin = stdin
        try:
            self._fd: int | None = stdin.fileno()
        except (AttributeError, OSError, ValueError):
            self._fd = None
        threading.Thread(target=self._run, name="sidecar-stdin", daemon=True).start()

    def _read(self) -> bytes:
        if self._fd is not None:
            return os.read(self._fd, READ_CHUNK)
        read1 = getattr(self._stdin, "read1", None)
        return read1(READ_CHUNK) if read1 else self._stdin.read(1)

    def _run(self) -> None:
        while True:
            try:
                chunk: Any = self._read()
            except OSError as exc:
                chunk = exc
            try:
                self._loop.call_soon_threadsafe(self.queue.put_nowait, chunk)
            except RuntimeError:  # the loop is closed
                return
            if not isinstance(chunk, bytes) or not chunk:
                return


async def serve(server: Any, stdin: BinaryIO, stop: threading.Event | None = None) -> int:
    """Read and dispatch messages until the input ends (0), ``stop`` is set (0), or the
    stream is lost (1)."""
    pump = _Pump(stdin, asyncio.get_running_loop())
    framer = Framer()
    while stop is None or not stop.is_set():
        if framer.in_body:
            try:
                chunk = await asyncio.wait_for(pump.queue.get(), STALL_S)
            except TimeoutError:
                chunk = None
        else:
            chunk = await pump.queue.get()
        if isinstance(chunk, OSError):
            log.error("cannot read stdin: %s; exiting", chunk)
            return 1
        if chunk is None:
            events = framer.stalled()
        elif not chunk:
            events = framer.eof()
        else:
            events = framer.feed(chunk)
        for kind, value in events:
            if kind == "message":
                dispatch(server, value)
            elif kind == "parse_error":
                log.warning("a message body that is not JSON: %s", value)
                send_error(server.protocol, None, PARSE_ERROR, "Parse error: the message body is not JSON")
            elif kind == "malformed":
                log.warning("malformed LSP frame: %s", value)
            elif kind == "lost":
                log.error("lost the LSP framing on stdin (%s); exiting so that the editor restarts the server", value)
                return 1
        if chunk is not None and not chunk:
            log.info("stdin closed")
            return 0
    return 0


def start_io(server: Any, stdin: BinaryIO, stdout: BinaryIO) -> int:
    """``server.start_io`` with this reader; returns the process's exit status."""
    server._stop_event = stop = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout))
    code = 0
    try:
        code = asyncio.run(serve(server, stdin, stop))
    except BrokenPipeError:
        log.error("the connection to the client is lost; shutting down")
    except KeyboardInterrupt:
        pass
    except SystemExit as exc:  # pygls' ``exit`` handler: 0 after ``shutdown``, else 1 (LSP)
        code = exc.code if isinstance(exc.code, int) else 0
    finally:
        server.shutdown()
    return code
