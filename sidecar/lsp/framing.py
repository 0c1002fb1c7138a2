"""Reading LSP frames from stdin so that the server never goes deaf.

pygls 2.1.1 (``pygls.io_.run_async``) matches each header line against exactly
``Content-Length: N\\r\\n`` and keeps the length it found until a body is read. One
malformed header (a lowercase name, a non-numeric or wrong length, a garbage line) leaves
it half-way through a frame, and from then on it swallows every later frame: the process
stays alive and answers nothing. Editors restart a server that died; they cannot restart
one that is deaf. This reader replaces it (``stdio.start_io``, called by ``sidecar serve``):

- header names are case-insensitive, other headers (``Content-Type``) are ignored, a line
  may end in ``\\r\\n`` or ``\\n``;
- a malformed header section or body is logged once (stderr) and the reader
  resynchronises on the next ``Content-Length: N`` header, wherever it starts;
- a declared length that runs past the message into the next frame (or past the last
  bytes, when nothing more comes for a moment) is cut at the end of the JSON value: the
  message is handled, the mismatch logged (``frame_syntax.py`` says why a header line
  inside a body starts the next frame). A body cut short is not JSON: it gets a Parse
  error and the rest is skipped up to the next header;
- when no header turns up in ``MAX_JUNK_BYTES`` of input, the stream is lost: the
  process says so on stderr and exits non-zero, so that the editor restarts it.

What a frame holds is checked as a JSON-RPC message by ``messages.py``; the stdin loop
is ``stdio.py``. See docs/architecture.md ("Rules of the house").
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .frame_syntax import _DIGITS, _HEADER_AT, _HEADER_LINE, _decode_prefix, _short

log = logging.getLogger(__name__)

MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 256 * 1024 * 1024
MAX_JUNK_BYTES = 1024 * 1024
STALL_S = 0.3
READ_CHUNK = 65536

PARSE_ERROR = -32700
INVALID_REQUEST = -32600

_KEEP_TAIL = 96  # bytes kept while resynchronising: a header split across two reads

Event = tuple[str, Any]  # ("message", obj) | ("parse_error", why) | ("malformed", why) | ("lost", why)


class Framer:
    """Cuts a byte stream into LSP messages; pure (no I/O), fed by :func:`serve`.

    ``feed`` returns events: ``("message", obj)`` for a JSON value to dispatch,
    ``("parse_error", why)`` for a body that is not JSON (answer -32700),
    ``("malformed", why)`` for a framing fault to log, ``("lost", why)`` when no header
    came in ``MAX_JUNK_BYTES`` bytes (exit non-zero)."""

    def __init__(self, max_junk: int = MAX_JUNK_BYTES) -> None:
        self.buf = bytearray()
        self.state = "headers"  # "headers" | "body" | "resync" | "lost"
        self.pos = 0  # next byte to look at
        self.frame_start = 0  # first byte of the frame being read
        self.body_start = 0
        self.length: int | None = None
        self.header_lines = 0
        self.scanned = 0  # body: searched for a header up to here
        self.junk = 0  # bytes skipped since the last good frame
        self.max_junk = max_junk
        self._stall_seen = -1

    # ------------------------------------------------------------------ public
    @property
    def in_body(self) -> bool:
        return self.state == "body"

    def feed(self, data: bytes) -> list[Event]:
        self.buf += data
        events: list[Event] = []
        self._run(events)
        return events

    def stalled(self) -> list[Event]:
        """Nothing more came for a while in the middle of a body: when the bytes so far
        are a whole JSON value, the declared length was too long; take the value."""
        events: list[Event] = []
        if self.state != "body" or self._stall_seen == len(self.buf):
            return events
        self._stall_seen = len(self.buf)
        got = _decode_prefix(bytes(self.buf[self.body_start :]))
        if got is None or bytes(self.buf[self.body_start + got[1] :]).strip():
            return events
        have = len(self.buf) - self.body_start
        events.append(
            (
                "malformed",
                f"Content-Length {self.length} is longer than the message ({have} bytes); handled the message as it is",
            )
        )
        events.append(("message", got[0]))
        self._next_frame(len(self.buf), good=True)
        self._run(events)
        return events

    def eof(self) -> list[Event]:
        """The input ended: take an overlong last body, report a cut-off frame."""
        events = self.stalled() if self.state == "body" else []
        rest = bytes(self.buf[self.frame_start if self.state != "resync" else self.pos :])
        if self.state != "lost" and rest.strip():
            events.append(("malformed", f"input ended in the middle of a message ({len(rest)} bytes unread)"))
        return events

    # ---------------------------------------------------------------- internals
    def _run(self, events: list[Event]) -> None:
        while True:
            if self.state == "headers":
                more = self._headers(events)
            elif self.state == "body":
                more = self._body(events)
            elif self.state == "resync":
                more = self._resync(events)
            else:
                more = False
            if not more:
                break
        self._compact()

    def _compact(self) -> None:
        cut = self.pos if self.state in ("resync", "lost") else self.frame_start
        if cut > 0:
            del self.buf[:cut]
            self.pos -= cut
            self.frame_start = max(self.frame_start - cut, 0)
            self.body_start = max(self.body_start - cut, 0)
            self.scanned = max(self.scanned - cut, 0)
            if self._stall_seen >= 0:
                self._stall_seen -= cut

    def _next_frame(self, at: int, good: bool) -> None:
        self.state = "headers"
        self.pos = self.frame_start = at
        self.length = None
        self.header_lines = 0
        if good:
            self.junk = 0

    def _malformed(self, events: list[Event], why: str, resync_from: int) -> bool:
        events.append(("malformed", f"{why}; skipping to the next Content-Length header"))
        self.state = "resync"
        self.pos = resync_from
        self.length = None
        return True

    def _headers(self, events: list[Event]) -> bool:
        nl = self.buf.find(b"\n", self.pos)
        if nl < 0 or nl + 1 - self.frame_start > MAX_HEADER_BYTES:
            if len(self.buf) - self.frame_start > MAX_HEADER_BYTES:
                return self._malformed(
                    events, f"a header section longer than {MAX_HEADER_BYTES} bytes", self.frame_start + 1
                )
            return False
        line = bytes(self.buf[self.pos : nl])
        if line.endswith(b"\r"):
            line = line[:-1]
        self.pos = nl + 1
        if not line:
            if self.length is not None:
                self.state = "body"
                self.body_start = self.scanned = self.pos
                self._stall_seen = -1
            elif self.header_lines == 0:  # a stray blank line between frames
                self.frame_start = self.pos
            else:
                return self._malformed(events, "a header section without Content-Length", self.frame_start + 1)
            return True
        m = _HEADER_LINE.fullmatch(line)
        if m is None:
            return self._malformed(events, f"not a header line: {_short(line)}", self.frame_start + 1)
        self.header_lines += 1
        name, value = m.groups()
        if name.lower() == b"content-length":
            if not _DIGITS.fullmatch(value):
                return self._malformed(events, f"Content-Length {_short(value)} is not a number", self.frame_start + 1)
            n = int(value)
            if n > MAX_BODY_BYTES:
                return self._malformed(
                    events, f"Content-Length {n} is over the {MAX_BODY_BYTES}-byte limit", self.frame_start + 1
                )
            if self.length is not None and self.length != n:
                return self._malformed(
                    events, f"two Content-Length headers ({self.length} and {n})", self.frame_start + 1
                )
            self.length = n
        return True

    def _body(self, events: list[Event]) -> bool:
        assert self.length is not None
        end = self.body_start + self.length
        if len(self.buf) >= end:
            return self._finish(events, bytes(self.buf[self.body_start : end]), end, overrun=False)
        # Incomplete. Has the next frame begun inside what the length claims?
        m = _HEADER_AT.search(self.buf, max(self.scanned - _KEEP_TAIL, self.body_start))
        self.scanned = len(self.buf)
        if m is None:
            return False
        return self._finish(events, bytes(self.buf[self.body_start : m.start()]), m.start(), overrun=True)

    def _finish(self, events: list[Event], body: bytes, end: int, overrun: bool) -> bool:
        """Parse a body; ``overrun``: cut at the next frame's header inside the length."""
        try:
            value = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            got = _decode_prefix(body)
            if got is None:
                events.append(("parse_error", f"{type(exc).__name__}: {exc}"))
                # Resynchronise from the start of this body: when its length was too
                # long, the next frame's header is inside it.
                self.state = "resync"
                self.pos = self.body_start
                self.length = None
                return True
            value, used = got
            events.append(
                (
                    "malformed",
                    f"Content-Length {self.length} is longer than the message "
                    f"({used} bytes, then {_short(body[used:], 30)}); handled the message "
                    f"and read on from its end",
                )
            )
            events.append(("message", value))
            self.state = "resync"
            self.pos = self.body_start + used
            self.length = None
            self.junk = 0
            return True
        if overrun:
            events.append(
                ("malformed", f"Content-Length {self.length} runs into the next frame after {len(body)} bytes")
            )
        events.append(("message", value))
        self._next_frame(end, good=True)
        return True

    def _resync(self, events: list[Event]) -> bool:
        m = _HEADER_AT.search(self.buf, self.pos)
        if m is not None:
            self.junk += m.start() - self.pos
            self._next_frame(m.start(), good=False)
            return True
        keep = max(self.pos, len(self.buf) - _KEEP_TAIL)
        self.junk += keep - self.pos
        self.pos = keep
        if self.junk > self.max_junk:
            self.state = "lost"
            events.append(("lost", f"no Content-Length header in {self.junk} bytes of input"))
        return False
