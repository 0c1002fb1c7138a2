"""The server's document store applies LSP edits exactly (sidecar/lsp/documents.py).

A property test runs random edit sequences through the document class against a small
reference applier written from the spec (and the reference client library's ``offsetAt``),
tests/support/documents.py: it works on the code units of the negotiated encoding, so it
shares no code and no idea of "line" with the implementation. It is here, not in
tests/unit, for its few seconds. Then one check over real stdio shows that the prompt the backend
receives is the editor's text after edits that pygls 2.1.1 applies to the wrong line.
The single cases are tests/unit/test_documents.py.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.lsp.documents import LspTextDocument, SpecPositionCodec, clamped_offset
from support.documents import (
    ENCODINGS,
    MAX_PIECES,
    PIECES,
    edit,
    from_units,
    ref_apply,
    ref_lines,
    ref_offset,
    to_units,
)

texts = st.lists(st.sampled_from(PIECES), max_size=MAX_PIECES).map("".join)


# ------------------------------------------------------------------- random edits
def positions(text: str, enc: str):
    """A position in ``text``: a character boundary on a line, a column past the end of
    its line, or a line past the last one (never inside a character)."""
    lines = ref_lines(text)

    @st.composite
    def pos(draw):
        line = draw(st.integers(0, len(lines) + 2))
        chars = lines[line] if line < len(lines) else ""
        if draw(st.booleans()):
            k = draw(st.integers(0, len(chars)))
            character = len(to_units(chars[:k], enc))
        else:
            character = len(to_units(chars, enc)) + draw(st.integers(1, 6))
        return types.Position(line=line, character=character)

    return pos()


@st.composite
def changes(draw, text: str, enc: str):
    if draw(st.integers(0, 9)) == 0:
        return types.TextDocumentContentChangeWholeDocument(text=draw(texts))
    start = draw(positions(text, enc))
    end = draw(positions(text, enc))  # sometimes before start: a reversed range
    return types.TextDocumentContentChangePartial(range=types.Range(start=start, end=end), text=draw(texts))


# ------------------------------------------------------------------ property tests
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), enc=st.sampled_from(ENCODINGS), initial=texts)
def test_random_edits_match_the_reference(data, enc, initial):
    doc = LspTextDocument("file:///p.py", source=initial, version=1, position_codec=SpecPositionCodec(enc))
    expected = initial
    for _ in range(data.draw(st.integers(1, 8))):
        change = data.draw(changes(expected, enc))
        expected = ref_apply(expected, change, enc)
        doc.apply_change(change)
        assert doc.source == expected
        # Every reader of the store sees the same text and LSP's lines.
        assert "".join(doc.lines) == expected
        ref = ref_lines(expected)
        assert [ln.rstrip("\r\n") for ln in doc.lines] == ref[: len(doc.lines)]
        assert len(doc.lines) == len(ref) - (expected == "" or expected.endswith(("\n", "\r")))
        pos = data.draw(positions(expected, enc))
        want = len(
            from_units(to_units(expected, enc)[: ref_offset(to_units(expected, enc), pos.line, pos.character)], enc)
        )
        assert doc.offset_at_position(pos) == want
        assert doc.offset_at_server_position(doc.position_from_client_units(pos)) == want  # pygls' helpers
        assert clamped_offset(expected, pos.line, pos.character, enc) == want


# --------------------------------------------------------------- over real stdio
KEY = "sk-test-not-a-real-key-1234567890"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("breaklike", ["\x85", "\u2028"])
async def test_prompt_is_the_editors_text_after_edits(tmp_path, breaklike):
    """Editor text ``x = 'a<NEL>b'`` then lines below it edited: pygls 2.1.1 would put
    the edits one line too high (it counts NEL / U+2028 as a line break)."""
    uri = "file:///w/nel.py"
    editor = f"x = 'a{breaklike}b'\ny = \n"
    edits = [
        edit(1, 4, 1, 4, "len(x"),  # y = len(x
        edit(1, 99, 1, 99, ") + "),  # past the end of the line: appended to it
        edit(2, 0, 2, 0, "z = '😀'\n"),  # a new line after the last line break
        edit(3, 0, 3, 0, "w = "),  # the (empty) last line
    ]
    cursor = (2, 7)  # between the emoji (2 UTF-16 units) and the quote
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.script(["1"])
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
        async with sidecar(env) as client:
            open_doc(client, uri, editor)
            for version, change in enumerate(edits, start=2):
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[change],
                    )
                )
                editor = ref_apply(editor, change, "utf-16")
            result = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params(uri, *cursor, invoked=True)), 20
            )
        assert editor == f"x = 'a{breaklike}b'\ny = len(x) + \nz = '😀'\nw = "
        (req,) = [r for r in sim.requests if r.path.endswith("/completions")]
    assert result is not None and result.items[0].insert_text == "1"
    offset = len(from_units(to_units(editor, "utf-16")[: ref_offset(to_units(editor, "utf-16"), *cursor)], "utf-16"))
    assert req.body["prompt"] == editor[:offset] == f"x = 'a{breaklike}b'\ny = len(x) + \nz = '😀"
    assert req.body["suffix"] == editor[offset:] == "'\nw = "
