"""LSP documents for tests of sidecar/lsp/documents.py: the pieces texts are made of (every
kind of line break and multi-unit character), and a small reference edit applier written from the spec
(and the reference client library's ``offsetAt``). The reference works on the code units of
the negotiated encoding, so it shares no code and no idea of "line" with the implementation.
"""

from __future__ import annotations

from lsprotocol import types

# Every character str.splitlines treats as a line break, LSP's three, emoji (surrogate
# pairs in UTF-16, 4 bytes in UTF-8), 2- and 3-byte UTF-8 characters.
BREAKLIKE = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PIECES = ["a", "b", "x = ", " ", "\t", "\n", "\r\n", "\r", "é", "€", "😀", "𝄞", *BREAKLIKE]
ENCODINGS = ["utf-16", "utf-8", "utf-32"]
#: Texts are up to this many pieces (the e2e property test's ``texts``, the unit test's samples).
MAX_PIECES = 30


def edit(line: int, ch: int, end_line: int, end_ch: int, text: str) -> types.TextDocumentContentChangePartial:
    """The change that replaces (line, ch)..(end_line, end_ch) with ``text``."""
    return types.TextDocumentContentChangePartial(
        range=types.Range(start=types.Position(line, ch), end=types.Position(end_line, end_ch)), text=text
    )


# ------------------------------------------------------------------- the reference
def to_units(text: str, enc: str) -> list[int]:
    if enc == "utf-8":
        return list(text.encode("utf-8"))
    if enc == "utf-16":
        raw = text.encode("utf-16-le")
        return [int.from_bytes(raw[i : i + 2], "little") for i in range(0, len(raw), 2)]
    return [ord(c) for c in text]


def from_units(units: list[int], enc: str) -> str:
    if enc == "utf-8":
        return bytes(units).decode("utf-8")
    if enc == "utf-16":
        return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le")
    return "".join(map(chr, units))


CR, LF = 13, 10


def line_offsets(units: list[int]) -> list[int]:
    """Start of every line: after LF, after CR not followed by LF, after CRLF."""
    offsets, i = [0], 0
    while i < len(units):
        if units[i] in (CR, LF):
            if units[i] == CR and i + 1 < len(units) and units[i + 1] == LF:
                i += 1
            offsets.append(i + 1)
        i += 1
    return offsets


def ref_offset(units: list[int], line: int, character: int) -> int:
    """vscode-languageserver-textdocument's offsetAt, on code units."""
    offsets = line_offsets(units)
    if line >= len(offsets):
        return len(units)
    start = offsets[line]
    if character <= 0:
        return start
    nxt = offsets[line + 1] if line + 1 < len(offsets) else len(units)
    off = min(start + character, nxt)
    while off > start and units[off - 1] in (CR, LF):
        off -= 1
    return off


def ref_apply(text: str, change, enc: str) -> str:
    rng = getattr(change, "range", None)
    if rng is None:
        return change.text
    units = to_units(text, enc)
    s = ref_offset(units, rng.start.line, rng.start.character)
    e = ref_offset(units, rng.end.line, rng.end.character)
    s, e = min(s, e), max(s, e)
    return from_units(units[:s] + to_units(change.text, enc) + units[e:], enc)


def ref_lines(text: str) -> list[str]:
    """The document's lines as code points (without line breaks)."""
    units = [ord(c) for c in text]
    offs = line_offsets(units)
    out = []
    for i, start in enumerate(offs):
        end = offs[i + 1] if i + 1 < len(offs) else len(units)
        while end > start and units[end - 1] in (CR, LF):
            end -= 1
        out.append(text[start:end])
    return out
