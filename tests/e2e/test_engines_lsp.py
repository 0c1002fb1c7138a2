"""External local engines end to end: the sidecar over stdio in local mode against the
simulator's llama-server (/infill) and Ollama (/api/generate) endpoints."""

from __future__ import annotations

import asyncio

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)
TEXT = "def add(a, b):\n    \n\nprint(add(1, 2))\n"


@pytest.mark.parametrize("engine, path", [("llama-server", "/infill"), ("ollama", "/api/generate")])
async def test_local_engine_by_url(tmp_path, engine, path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as sim:
        sim.set_responder(lambda body: "return a + b")
        cloud = "http://127.0.0.1:9/v1"  # configured but must never be used in local mode
        env = sidecar_env(
            tmp_path,
            SIDECAR_MODE="local",
            SIDECAR_LOCAL_ENGINE=engine,
            SIDECAR_LOCAL_URL=sim.base_url.removesuffix("/v1"),
            SIDECAR_LOCAL_MODEL="qwen2.5-coder:1.5b",
            SILICONFLOW_API_KEY="sk-x",
            SIDECAR_BASE_URL=cloud,
        )
        async with sidecar(env) as client:
            open_doc(client, "file:///w/a.py", TEXT)
            result = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params("file:///w/a.py", 1, 4)), 20
            )
        # (Ollama also gets one preload request with no prompt, which loads the model.)
        reqs = [r for r in sim.requests if r.path == path and (r.body or {}).get("stream", True) is not False]
    assert result is not None and result.items[0].insert_text == "return a + b"
    assert len(reqs) == 1
    body = reqs[0].body
    if engine == "llama-server":
        assert body["input_prefix"] == "def add(a, b):\n    "
        assert body["input_suffix"] == "\n\nprint(add(1, 2))\n"
        assert body["cache_prompt"] is True and len(body["stop"]) <= 4
    else:
        assert body["model"] == "qwen2.5-coder:1.5b"
        assert body["prompt"] == "def add(a, b):\n    " and body["suffix"] == "\n\nprint(add(1, 2))\n"
        assert body["options"]["num_predict"] > 0 and body["keep_alive"]
    assert not any(r.auth_present for r in sim.requests)  # no API key goes to a local engine
