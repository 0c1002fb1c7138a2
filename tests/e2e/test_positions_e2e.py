"""Positions of ``textDocument/inlineCompletion`` past the end of their line, over real
stdio: LSP 3.17 §Position, "If the character value is greater than the line length it
defaults back to the line length", for the prompt's cursor and for the item's range."""

from __future__ import annotations

import asyncio

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

KEY = "sk-test-positions-0123456789"
URI = "file:///w/p.py"


@pytest.mark.timeout(60)
async def test_a_column_past_the_line_end_is_the_line_end(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda body: "x)")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")
        init = {"debounceMinMs": 0, "debounceMaxMs": 0, "prefetchEnabled": False}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, URI, "x = 1\nfoo(\ny = 2\n")
            answer = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params(URI, 1, 1_000_000)), 30
            )
    reqs = [r for r in sim.requests if r.path.endswith("/completions") and r.body]
    assert len(reqs) == 1 and reqs[0].body["prompt"].endswith("x = 1\nfoo(")
    assert answer is not None and answer.items[0].insert_text == "x)"
    rng = answer.items[0].range
    assert (rng.start.line, rng.start.character, rng.end.line, rng.end.character) == (1, 4, 1, 4)
