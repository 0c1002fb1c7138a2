"""The server's document store applies LSP edits exactly (sidecar/lsp/documents.py): its
lines end only at LSP's line breaks, and single edits (clamping, reversed ranges, the
client's positions left alone, the NEL that pygls 2.1.1 takes for a line break).

The pieces texts are made of and the reference lines are tests/support/documents.py's. The
property test of random edit sequences against its reference applier (a few seconds) and
the check over real stdio are tests/e2e/test_documents_e2e.py.
"""

from __future__ import annotations

import itertools
import random

from lsprotocol import types
from pygls.workspace import TextDocument, Workspace

from sidecar.lsp.documents import LspTextDocument, LspWorkspace, SpecPositionCodec, encoding_name, split_lines
from support.documents import MAX_PIECES, PIECES, edit, ref_lines


# ------------------------------------------------------------------ every short text
def texts():
    """Every text of up to three pieces (each line break next to each other piece, on
    either side, and between two), then 200 longer ones drawn at random (seeded)."""
    for n in range(4):
        yield from ("".join(p) for p in itertools.product(PIECES, repeat=n))
    rnd = random.Random(24)
    for _ in range(200):
        yield "".join(rnd.choices(PIECES, k=rnd.randint(4, MAX_PIECES)))


def test_split_lines_ends_lines_only_at_lsp_breaks():
    for text in texts():
        lines = split_lines(text)
        assert "".join(lines) == text
        for ln in lines[:-1]:
            assert ln.endswith(("\n", "\r")), text
        assert [ln.rstrip("\r\n") for ln in lines] == ref_lines(text)[: len(lines)], text


# ------------------------------------------------------------------- single cases
def test_pygls_own_document_drifts_on_nel():
    """Why documents.py exists: pygls 2.1.1 takes ``\\x85`` for a line break."""
    theirs = TextDocument("file:///p.py", source="x = 'a\x85b'\ny = ")
    change = edit(1, 4, 1, 4, "1")
    theirs.apply_change(change)
    assert theirs.source == "x = 'a\x85b'1\ny = "  # on the line after the NEL
    assert change.range.start.character == 2  # and it rewrote the client's position
    ours = LspTextDocument("file:///p.py", source="x = 'a\x85b'\ny = ")
    ours.apply_change(edit(1, 4, 1, 4, "1"))
    assert ours.source == "x = 'a\x85b'\ny = 1"


def test_past_the_end_positions_clamp():
    doc = LspTextDocument("file:///p.py", source="ab\r\ncd")
    doc.apply_change(edit(0, 99, 0, 99, "!"))  # past the line: its end, before CRLF
    assert doc.source == "ab!\r\ncd"
    doc.apply_change(edit(7, 0, 9, 3, "?"))  # past the last line: the end of the document
    assert doc.source == "ab!\r\ncd?"
    doc.apply_change(edit(1, 1, 0, 1, ""))  # reversed range
    assert doc.source == "ad?"


def test_codec_does_not_rewrite_the_clients_position():
    doc = LspTextDocument("file:///p.py", source="abc\n", position_codec=SpecPositionCodec("utf-16"))
    pos = types.Position(0, 10)
    assert doc.position_from_client_units(pos).character == 3
    assert pos.character == 10  # pygls' codec sets it to 2


def test_encoding_name():
    assert encoding_name(types.PositionEncodingKind.Utf16) == "utf-16"
    assert encoding_name(types.PositionEncodingKind.Utf8) == "utf-8"
    assert encoding_name("utf-32") == "utf-32"
    assert encoding_name(None) == "utf-16"
    assert str(types.PositionEncodingKind.Utf16) != "utf-16"  # why str() is not used


def test_protocol_holds_an_lsp_workspace(tmp_path):
    from sidecar.lsp.server import create_server

    server = create_server([{}, {}], [])
    server.protocol._workspace = Workspace(None, position_encoding=types.PositionEncodingKind.Utf8)
    ws = server.workspace
    assert isinstance(ws, LspWorkspace)
    ws.put_text_document(types.TextDocumentItem(uri="file:///a.py", language_id="python", version=1, text="é\n"))
    doc = ws.get_text_document("file:///a.py")
    assert isinstance(doc, LspTextDocument) and doc.encoding == "utf-8"
