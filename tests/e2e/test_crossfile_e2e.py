"""Cross-file context over real stdio: the prompt the backend receives carries the other
file's snippet, the same block at every keystroke. Which snippets, in which format, is
tests/unit/test_crossfile.py; both open the documents of
tests/support/crossfile_texts.py."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from support.crossfile_texts import A_TEXT, B_TEXT, A, B

KEY = "sk-test-crossfile-0123456789"


def _completions(sim):
    return [r for r in sim.requests if r.path.endswith("/completions") and r.body]


def _type(client, uri, version, line, col, text):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=line, character=col), end=types.Position(line=line, character=col)
                    ),
                    text=text,
                )
            ],
        )
    )


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fim,marker", [("auto", "# Path: geometry.py\n"), ("template", "<|file_sep|>geometry.py\n")])
async def test_real_stdio_prompt_carries_the_other_files_snippet(tmp_path, fim, marker):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=500, seed=1)) as sim:
        sim.set_responder(lambda body: "42")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")
        init = {"debounceMinMs": 0, "debounceMaxMs": 0, "prefetchEnabled": False, "fim": fim}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, B, B_TEXT)
            _type(client, B, 2, 41, 0, "    ")  # an edit in the other file, inside compute_area
            open_doc(client, A, A_TEXT)
            line, col = 4, 4
            prompts = []
            for i, ch in enumerate(["", "t", "o"]):
                if ch:
                    _type(client, A, 1 + i, line, col, ch)
                    col += 1
                before = len(_completions(sim))
                await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(A, line, col)), 30)
                for _ in range(100):
                    if len(_completions(sim)) > before:
                        break
                    await asyncio.sleep(0.02)
                assert len(_completions(sim)) > before, "each keystroke's request went upstream"
                prompts.append(_completions(sim)[-1].body["prompt"])
    assert len(prompts) == 3
    for p in prompts:
        assert marker in p and "def compute_area(w, h):" in p
        assert "app.py" in p and "filler line 35" in p  # the current path and the edited region
        assert "import geometry" in p and p.count("def main():") == 1  # the current file once, as itself
    blocks = [p[: p.index("import geometry")] for p in prompts]
    assert blocks[0] == blocks[1] == blocks[2]  # the same snippet block across keystrokes
