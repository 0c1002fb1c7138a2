"""LSP positions to string offsets, following the spec rather than ``str.splitlines``.

LSP 3.17+ §Position: lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only, and ``character`` counts
code units of the negotiated position encoding (UTF-16 by default; ``utf-8`` and
``utf-32`` may be negotiated). Python strings index by code point, so a character
outside the BMP (an emoji) is 2 UTF-16 units but 1 Python index.
"""

from __future__ import annotations

import re

_EOL = re.compile(r"\r\n|\r|\n")


class InvalidPosition(ValueError):
    """A position outside the document, or inside a surrogate pair / multi-byte character."""


def _units(ch: str, encoding: str) -> int:
    o = ord(ch)
    if encoding == "utf-16":
        return 2 if o > 0xFFFF else 1
    if encoding == "utf-8":
        return 1 if o < 0x80 else 2 if o < 0x800 else 3 if o < 0x10000 else 4
    return 1


def line_bounds(text: str, line: int) -> tuple[int, int]:
    """(start, end) string offsets of ``line`` (0-based), end excluding the line break.

    Raises InvalidPosition when the document has fewer lines.
    """
    if line < 0:
        raise InvalidPosition(f"line {line} is negative")
    start = 0
    if line:
        n = 0
        for m in _EOL.finditer(text):
            n += 1
            if n == line:
                start = m.end()
                break
        else:
            raise InvalidPosition(f"line {line} is past the end of the document ({n + 1} lines)")
    end = _EOL.search(text, start)
    return start, (end.start() if end else len(text))


def offset_at(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """String offset (code points) of an LSP position.

    ``character`` is in ``encoding`` code units; a column past the end of its line means
    the end of the line (LSP §Position: "it defaults back to the line length"). Raises
    InvalidPosition for a line past the end, a negative value, or a column in the middle
    of a character (inside a surrogate pair).
    """
    if character < 0:
        raise InvalidPosition(f"character {character} is negative")
    start, end = line_bounds(text, line)
    units = 0
    i = start
    while units < character:
        if i >= end:
            return end
        units += _units(text[i], encoding)
        i += 1
    if units != character:
        raise InvalidPosition(f"character {character} on line {line} falls inside a character")
    return i


def units_of(s: str, encoding: str = "utf-16") -> int:
    """Length of ``s`` in ``encoding`` code units."""
    if encoding == "utf-32":
        return len(s)
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s) + sum(1 for c in s if ord(c) > 0xFFFF)
