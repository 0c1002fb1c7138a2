"""The server's copy of each open document, kept exactly as the editor has it.

pygls 2.1.1's ``TextDocument`` applies incremental edits on ``str.splitlines``, which
also ends lines at ``\\f``, ``\\v``, ``\\x1c``-``\\x1e``, ``\\x85``, U+2028 and U+2029, and
its position codec moves a column past the end of a line to one *before* the end (and
writes that back into the request's params). Either makes its copy drift from the
editor's, and every prompt after that is built from text the user does not have.

LSP (3.17 §Position, §TextDocumentContentChangeEvent) says instead:

- lines end at ``\\n``, ``\\r\\n`` or ``\\r`` only;
- ``character`` counts code units of the negotiated position encoding (UTF-16 unless
  the client and server agreed on ``utf-8`` or ``utf-32``);
- a ``character`` past the end of its line means the end of that line (before its line
  break), and a position past the last line means the end of the document.

That is also what the reference client library does (vscode-languageserver-textdocument
``offsetAt``: ``min(lineOffset + character, nextLineOffset)``, then back over the line
break; a reversed range is swapped). :class:`LspTextDocument` follows it for edits,
for ``lines`` and for pygls' position helpers. A position inside a character (the
second half of a UTF-16 surrogate pair, the middle of a UTF-8 sequence) cannot be held
by a Python string; it is taken as the start of that character.

:class:`DocumentsProtocolMixin` makes pygls' protocol hold a :class:`LspWorkspace`
(which creates these documents) whatever code creates the workspace.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import islice
from typing import Any

from lsprotocol import types
from pygls.workspace import PositionCodec, TextDocument, Workspace
from pygls.workspace.position_codec import ServerTextPosition

from .positions import _units  # code units of one character in an LSP position encoding

_EOL = re.compile(r"\r\n|\r|\n")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")

ENCODINGS = ("utf-8", "utf-16", "utf-32")


def encoding_name(encoding: Any) -> str:
    """``"utf-8"``, ``"utf-16"`` or ``"utf-32"`` for a negotiated position encoding
    (a ``PositionEncodingKind``, its string value, or None for the default UTF-16).

    Note that ``str(PositionEncodingKind.Utf16)`` is ``"PositionEncodingKind.Utf16"``;
    use this, not ``str()``."""
    value = getattr(encoding, "value", encoding)
    value = str(value).lower() if value else "utf-16"
    return value if value in ENCODINGS else "utf-16"


def split_lines(text: str) -> list[str]:
    """The document's lines with their line breaks, as ``str.splitlines(True)`` would
    give them if only ``\\n``, ``\\r\\n`` and ``\\r`` ended lines (no empty last entry
    after a final line break)."""
    return _LINE.findall(text)


def line_span(text: str, line: int) -> tuple[int, int] | None:
    """(start, end) offsets of ``line`` without its line break; None past the last line."""
    if line <= 0:
        start = 0
    else:
        m = next(islice(_EOL.finditer(text), line - 1, None), None)
        if m is None:
            return None
        start = m.end()
    m = _EOL.search(text, start)
    return start, (m.start() if m else len(text))


def column_offset(text: str, start: int, end: int, character: int, encoding: str) -> int:
    """Offset of ``character`` code units into ``text[start:end]`` (one line), clamped
    to ``end``; a column inside a character gives that character's start."""
    if character <= 0:
        return start
    if encoding == "utf-32" or text[start:end].isascii():
        return min(start + character, end)
    units = 0
    i = start
    while i < end:
        units += _units(text[i], encoding)
        if units > character:
            return i
        i += 1
        if units == character:
            return i
    return end


def clamped_offset(text: str, line: int, character: int, encoding: str = "utf-16") -> int:
    """String offset of an LSP position with LSP's clamping: a column past the end of its
    line is the end of the line, a line past the last one is the end of the document,
    negative values count as 0."""
    span = line_span(text, max(line, 0))
    if span is None:
        return len(text)
    return column_offset(text, span[0], span[1], character, encoding)


def _eol_len(line: str) -> int:
    return 2 if line.endswith("\r\n") else 1 if line.endswith(("\n", "\r")) else 0


def locate(lines: Sequence[str], line: int, character: int, encoding: str = "utf-16") -> tuple[int, int]:
    """(index into ``lines``, code point column) of an LSP position, clamped as LSP says;
    ``lines`` as :func:`split_lines` gives them. ``(len(lines), 0)`` is the empty last
    line after a final line break."""
    n = len(lines)
    line = max(line, 0)
    if line >= n:
        if n == 0 or _eol_len(lines[-1]):
            return n, 0
        return n - 1, len(lines[-1])
    text = lines[line]
    return line, column_offset(text, 0, len(text) - _eol_len(text), character, encoding)


class SpecPositionCodec(PositionCodec):
    """pygls' codec with LSP's clamping and without writing into the position it is given
    (pygls' sets ``position.character`` to one before the end of a line)."""

    def position_from_client_units(self, lines: Sequence[str], position: types.Position) -> ServerTextPosition:
        line, col = locate(lines, position.line, position.character, encoding_name(self.encoding))
        return ServerTextPosition(line, col)


class LspTextDocument(TextDocument):
    """A pygls ``TextDocument`` that applies edits and splits lines as LSP says.

    After the first edit it keeps the text as a list of lines, so an edit costs the
    lines it touches (plus one on each side, where a ``\r`` and a ``\n`` may join into
    one line break), not the whole document; ``source`` joins them once per version."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._line_list: list[str] | None = None  # the lines of the text, once edited

    @property
    def encoding(self) -> str:
        return encoding_name(self._position_codec.encoding)

    @property
    def source(self) -> str:
        if self._source is None and self._line_list is not None:
            self._source = "".join(self._line_list)
        return super().source

    def _lines(self) -> list[str]:
        if self._line_list is None:
            self._line_list = split_lines(self.source)
        return self._line_list

    def _apply_full_change(self, change: types.TextDocumentContentChangeEvent) -> None:
        self._source = change.text
        self._line_list = None

    def _apply_incremental_change(self, change: types.TextDocumentContentChangePartial) -> None:
        lines = self._lines()
        enc = self.encoding
        start = locate(lines, change.range.start.line, change.range.start.character, enc)
        end = locate(lines, change.range.end.line, change.range.end.character, enc)
        if end < start:  # a reversed range
            start, end = end, start
        (ls, cs), (le, ce) = start, end
        lo, hi = max(ls - 1, 0), min(le + 2, len(lines))
        head = "".join(lines[lo:ls]) + (lines[ls][:cs] if ls < len(lines) else "")
        tail = (lines[le][ce:] if le < len(lines) else "") + "".join(lines[le + 1 : hi])
        lines[lo:hi] = split_lines(head + change.text + tail)
        self._source = None

    @property
    def lines(self) -> Sequence[str]:
        return tuple(self._lines())

    def offset_at_position(self, client_position: types.Position) -> int:
        lines = self._lines()
        li, col = locate(lines, client_position.line, client_position.character, self.encoding)
        return sum(map(len, lines[:li])) + col


class LspWorkspace(Workspace):
    """pygls' workspace, creating :class:`LspTextDocument` documents."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._position_codec = SpecPositionCodec(encoding=self._position_encoding)

    @classmethod
    def adopt(cls, ws: Workspace) -> LspWorkspace:
        """The same workspace (root, sync kind, folders, encoding, documents) as ours."""
        if isinstance(ws, cls):
            return ws
        new = cls(ws.root_uri, ws._sync_kind, None, ws.position_encoding)
        new._folders = dict(ws.folders)
        new._notebook_documents = ws._notebook_documents
        new._cell_in_notebook = ws._cell_in_notebook
        for uri, doc in ws.text_documents.items():
            new._text_documents[uri] = new._create_text_document(
                doc.uri, source=doc._source, version=doc.version, language_id=doc.language_id
            )
        return new

    def _create_text_document(
        self, doc_uri: str, source: str | None = None, version: int | None = None, language_id: str | None = None
    ) -> LspTextDocument:
        return LspTextDocument(
            doc_uri,
            source=source,
            version=version,
            language_id=language_id,
            sync_kind=self._sync_kind,
            position_codec=self._position_codec,
        )


class DocumentsProtocolMixin:
    """Put before pygls' ``LanguageServerProtocol`` in the bases: whatever workspace pygls
    creates (at ``initialize``) is replaced by an :class:`LspWorkspace` holding the same."""

    @property
    def _workspace(self) -> Workspace | None:
        return self.__dict__.get("_sidecar_workspace")

    @_workspace.setter
    def _workspace(self, ws: Workspace | None) -> None:
        self.__dict__["_sidecar_workspace"] = None if ws is None else LspWorkspace.adopt(ws)
