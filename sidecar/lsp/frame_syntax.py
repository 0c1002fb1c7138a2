"""The bytes of an LSP frame, as the :class:`~.framing.Framer` reads them (the LSP
specification's "Base Protocol"; docs/architecture.md, "Rules of the house").

- A header line is ``name: value`` (blanks around the colon and after the value are
  ignored); the Framer compares names case-insensitively, and a line may end in
  ``\\r\\n`` or ``\\n``. A ``Content-Length`` value is 1 to 15 ASCII digits.
- ``_HEADER_AT`` finds the start of a frame anywhere in the stream, for
  resynchronisation and for a body whose declared length runs into the next frame: a
  JSON text never contains a raw line break inside a string nor a bare word, so a
  ``Content-Length: N`` line cannot be part of a valid body.
- ``_decode_prefix`` finds the JSON object or array at the start of a body whose length
  was wrong (bytes from the first invalid UTF-8 sequence on are ignored).
"""

from __future__ import annotations

import json
import re
from typing import Any

# The start of a frame anywhere in the stream (resynchronisation, overlong bodies).
_HEADER_AT = re.compile(rb"content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n", re.IGNORECASE)
_HEADER_LINE = re.compile(rb"([!-9;-~]+)[ \t]*:[ \t]*(.*?)[ \t]*")
_DIGITS = re.compile(rb"[0-9]{1,15}")
_decoder = json.JSONDecoder()


def _short(data: bytes, n: int = 60) -> str:
    return repr(data[:n]) + ("..." if len(data) > n else "")


def _decode_prefix(body: bytes) -> tuple[Any, int] | None:
    """The JSON object or array at the start of ``body`` (after whitespace) and the byte
    offset just after it, or None."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = body[: exc.start].decode("utf-8")
    stripped = text.lstrip()
    try:
        value, end = _decoder.raw_decode(stripped)
    except ValueError:
        return None
    if not isinstance(value, (dict, list)):
        return None
    consumed = len(text) - len(stripped) + end
    return value, len(text[:consumed].encode("utf-8"))
