"""External local engines (llama-server's /infill, Ollama's /api/generate) against the
simulator's engine endpoints, over real HTTP on loopback (the request shapes alone are
tests/unit/test_engines.py)."""

from __future__ import annotations

import asyncio
import socket
import time
from contextlib import aclosing

import httpx2 as httpx
import pytest

from devtools.simulator import Fault, LatencyModel, SimulatedBackend
from sidecar.backends.base import StreamInfo, UpstreamRequest
from sidecar.backends.errors import ENGINE, FIM_UNSUPPORTED, MODEL_NOT_FOUND, BackendError
from sidecar.backends.llama_server import LlamaServerBackend
from sidecar.backends.ollama import OllamaBackend
from sidecar.completion.prompts import generate_request, infill_request
from support.engines import MODEL, ctx_at

FAST = LatencyModel(ttft_ms=2, tokens_per_s=2000, seed=0)
SLOW = LatencyModel(ttft_ms=2, tokens_per_s=100, seed=0)


@pytest.fixture
async def sim():
    async with SimulatedBackend(FAST) as backend:
        yield backend


@pytest.fixture
async def llama(sim):
    b = LlamaServerBackend(base_url=sim.url, ready_timeout_s=5)
    yield b
    await b.aclose()


@pytest.fixture
async def ollama(sim):
    b = OllamaBackend(base_url=sim.url, model=MODEL, ready_timeout_s=5)
    yield b
    await b.aclose()


async def collect(backend, req, info=None):
    info = info or StreamInfo()
    parts = [d async for d in backend.stream(req, info)]
    return "".join(parts), info


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- llama-server --------------------------------------------------------------------


async def test_llama_server_infill_stream(sim, llama):
    assert llama.api == "llama-server" and llama.provider == "local"
    sim.script(["return a + b\n\nprint('extra')", "return a + b\n"])
    ctx = ctx_at()
    req = infill_request(ctx, max_tokens=32, temperature=0.1, extra=[{"filename": "u.py", "text": "X = 1\n"}])
    text, info = await collect(llama, req)
    assert text == "return a + b"  # cut at the "\n\n" stop sequence
    assert info.finish_reason == "stop" and not info.truncated and info.malformed_events == 0
    assert info.first_token_at >= info.sent_at > 0 and info.usage["completion_tokens"] == 7
    first_cached = info.usage["cached_tokens"]
    record = sim.requests[0]
    assert record.path == "/infill" and record.stream and record.completed
    body = record.body
    assert body["input_prefix"] == ctx.prefix and body["input_suffix"] == ctx.suffix
    assert body["input_extra"] == [{"filename": "u.py", "text": "X = 1\n"}]
    assert body["n_predict"] == 32 and body["cache_prompt"] is True and body["stream"] is True
    assert body["stop"] == ["\n\n"] and len(body["stop"]) <= 4

    # The same prompt again: the server reuses its KV cache, and the stream read to its
    # end left the connection in the pool.
    text2, info2 = await collect(llama, req)
    assert text2 == "return a + b\n"
    assert first_cached == 0 and info2.usage["cached_tokens"] > 0
    assert sim.requests[1].client_port == record.client_port


async def test_llama_server_n_predict_is_a_limit(sim, llama):
    sim.script(["a b c d e f g h"])
    text, info = await collect(llama, infill_request(ctx_at(), max_tokens=3, temperature=0.0))
    assert text == "a b" and info.finish_reason == "length"


async def test_llama_server_early_close_disconnects(sim, llama):
    sim.set_latency(SLOW)
    sim.script(["tok " * 200])
    agen = llama.stream(infill_request(ctx_at(), max_tokens=400, temperature=0.0), StreamInfo())
    async with aclosing(agen):
        got = [await agen.__anext__() for _ in range(3)]
    assert "".join(got) == "tok tok"
    record = await sim.wait_for_disconnect(0, timeout=2.0)
    assert record.disconnected and not record.completed and record.tokens_sent < record.tokens_total


async def test_llama_server_malformed_event_skipped_and_cut_truncates(sim, llama):
    sim.script(["return a + b\n", "return a + b\n"])
    sim.inject(Fault.malformed(after_tokens=2))
    text, info = await collect(llama, infill_request(ctx_at(), max_tokens=32, temperature=0.0))
    assert text == "return a + b\n" and info.malformed_events == 1 and not info.truncated

    sim.inject(Fault.cut(after_tokens=2))
    text, info = await collect(llama, infill_request(ctx_at(), max_tokens=32, temperature=0.0))
    assert text == "return " and info.truncated


async def test_llama_server_waits_through_loading(sim, llama):
    sim.set_loading(0.4)
    t0 = time.monotonic()
    await llama.ensure_ready()
    assert time.monotonic() - t0 >= 0.35 and llama.ready
    health = [r for r in sim.requests if r.path == "/health"]
    assert health[0].status == 503 and health[-1].status == 200
    await llama.ensure_ready()  # only until the first success: no more polling
    assert len([r for r in sim.requests if r.path == "/health"]) == len(health)


async def test_llama_server_not_running():
    port = free_port()
    b = LlamaServerBackend(base_url=f"http://127.0.0.1:{port}/v1", ready_timeout_s=0.3)
    assert b.base_url == f"http://127.0.0.1:{port}"  # the root, even when given a /v1 URL
    try:
        with pytest.raises(BackendError) as exc_info:
            await b.ensure_ready()
        # Nothing listens: it fails at once (a request must not wait out ready_timeout_s).
        assert exc_info.value.kind == ENGINE and "is not running" in exc_info.value.message
        assert "llama-server -m MODEL.gguf" in exc_info.value.message
    finally:
        await b.aclose()


async def test_llama_server_still_loading_after_timeout(sim):
    sim.set_loading(5)
    b = LlamaServerBackend(base_url=sim.url, ready_timeout_s=0.3)
    try:
        with pytest.raises(BackendError) as exc_info:
            await b.ensure_ready()
        assert exc_info.value.kind == ENGINE and "Loading model" in exc_info.value.message
    finally:
        await b.aclose()


async def test_llama_server_model_without_fim(sim, llama):
    sim.infill_supported = False
    with pytest.raises(BackendError) as exc_info:
        await collect(llama, infill_request(ctx_at(), max_tokens=8, temperature=0.0))
    assert exc_info.value.kind == FIM_UNSUPPORTED


# -- Ollama ------------------------------------------------------------------------------


async def test_ollama_generate_stream(sim, ollama):
    assert ollama.api == "ollama" and ollama.provider == "local"
    out = "s = 'a\u2028b'  # é\n    t = 1"  # U+2028 must not split a line
    sim.script([out + "\n\nmore"])
    ctx = ctx_at()
    text, info = await collect(ollama, generate_request(ctx, model=MODEL, fim=True, max_tokens=40, temperature=0.1))
    assert text == out
    assert info.finish_reason == "stop" and not info.truncated and info.malformed_events == 0
    assert info.usage["completion_tokens"] > 0 and info.usage["prompt_tokens"] > 0 and "eval_ms" in info.usage
    record = sim.requests[0]
    assert record.path == "/api/generate" and record.stream and record.completed
    assert record.headers["content-type"].startswith("application/json")
    body = record.body
    assert body["model"] == MODEL and body["prompt"] == ctx.prefix and body["suffix"] == ctx.suffix
    assert body["raw"] is False and body["stream"] is True and body["keep_alive"] == "30m"
    assert body["options"]["num_predict"] == 40 and body["options"]["stop"] == ["\n\n"]

    sim.script(["x y z w"])
    text, info = await collect(ollama, generate_request(ctx, model=MODEL, fim=False, max_tokens=2, temperature=0.0))
    assert text == "x " and info.finish_reason == "length"
    assert sim.requests[1].body["raw"] is True and "suffix" not in sim.requests[1].body
    assert sim.requests[1].client_port == record.client_port  # read to the end: connection reused


async def test_ollama_early_close_disconnects(sim, ollama):
    sim.set_latency(SLOW)
    sim.script(["tok " * 200])
    agen = ollama.stream(
        generate_request(ctx_at(), model=MODEL, fim=True, max_tokens=400, temperature=0.0), StreamInfo()
    )
    async with aclosing(agen):
        for _ in range(3):
            await agen.__anext__()
    record = await sim.wait_for_disconnect(0, timeout=2.0)
    assert record.disconnected and not record.completed and record.tokens_sent < record.tokens_total


async def test_ollama_malformed_line_skipped_and_cut_truncates(sim, ollama):
    sim.script(["return a + b\n", "return a + b\n"])
    req = generate_request(ctx_at(), model=MODEL, fim=True, max_tokens=32, temperature=0.0)
    sim.inject(Fault.malformed(after_tokens=1))
    text, info = await collect(ollama, req)
    assert text == "return a + b\n" and info.malformed_events == 1 and not info.truncated
    sim.inject(Fault.cut(after_tokens=2))
    text, info = await collect(ollama, req)
    assert text == "return " and info.truncated


async def test_ollama_model_not_pulled(sim):
    sim.set_ollama_models([MODEL])
    b = OllamaBackend(base_url=sim.url + "/v1", model="nope:7b", ready_timeout_s=2)
    try:
        with pytest.raises(BackendError) as exc_info:
            await collect(b, generate_request(ctx_at(), model="nope:7b", fim=True, max_tokens=8, temperature=0.0))
        err = exc_info.value
        assert err.kind == MODEL_NOT_FOUND and err.status == 404 and "ollama pull nope:7b" in err.message
        with pytest.raises(BackendError) as exc_info:
            await b.ensure_ready()  # the preload names the same cause
        assert exc_info.value.kind == MODEL_NOT_FOUND and "ollama pull nope:7b" in exc_info.value.message
        assert await b.list_models() == [MODEL]
    finally:
        await b.aclose()


async def test_ollama_model_without_fim_template(sim, ollama):
    sim.set_ollama_models([MODEL], no_insert=[MODEL])
    with pytest.raises(BackendError) as exc_info:
        await collect(ollama, generate_request(ctx_at(), model=MODEL, fim=True, max_tokens=8, temperature=0.0))
    assert exc_info.value.kind == FIM_UNSUPPORTED
    sim.script(["ok"])
    text, _ = await collect(ollama, generate_request(ctx_at(), model=MODEL, fim=False, max_tokens=8, temperature=0.0))
    assert text == "ok"


async def test_ollama_ready_after_start_and_model_load():
    """Connection refused while the server is not running (fails at once, naming
    `ollama serve`), then, once it runs, a model load of 0.3 s that the caller waits for."""
    port = free_port()
    b = OllamaBackend(base_url=f"http://127.0.0.1:{port}", model=MODEL, ready_timeout_s=5)
    waiting = None
    try:
        t0 = time.monotonic()
        with pytest.raises(BackendError) as exc_info:
            await b.ensure_ready()
        assert time.monotonic() - t0 < 1.0 and "ollama serve" in exc_info.value.message
        async with SimulatedBackend(FAST, port=port) as sim:
            sim.set_loading(0.3)
            t0 = time.monotonic()
            waiting = asyncio.ensure_future(b.ensure_ready())
            await asyncio.wait_for(waiting, 3)
            assert b.ready and time.monotonic() - t0 >= 0.25
            paths = [r.path for r in sim.requests]
            assert paths[0] == "/api/version" and paths[-1] == "/api/generate"
            load = sim.requests[-1]
            assert load.body == {"model": MODEL, "keep_alive": "30m", "stream": False} and load.completed
    finally:
        if waiting is not None:
            waiting.cancel()
        await b.aclose()


async def test_prewarm_and_loading_control_endpoint(sim, llama, ollama):
    await llama.prewarm()
    await ollama.prewarm()
    assert [r.path for r in sim.requests] == ["/health", "/api/version"]
    assert llama.has_idle_connection() and ollama.has_idle_connection()
    async with httpx.AsyncClient(trust_env=False) as client:
        r = await client.post(f"{sim.url}/_sim/loading", json={"seconds": 10})
        assert r.status_code == 200 and r.json()["loading_s"] > 9
        r = await client.get(f"{sim.url}/health")
        assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model"
        assert (await client.post(f"{sim.url}/_sim/loading", json={"seconds": "x"})).status_code == 400
        await client.post(f"{sim.url}/_sim/reset")
        assert (await client.get(f"{sim.url}/health")).json() == {"status": "ok"}


async def test_llama_server_openai_fallback_request(sim, llama):
    """A plain prefix request (no FIM) goes to llama-server's /v1/completions."""
    sim.script(["return a + b\n"])
    req = UpstreamRequest("completions", {"prompt": ctx_at().prefix, "max_tokens": 8, "stop": ["\n\n"]}, "prefix")
    text, info = await collect(llama, req)
    assert text == "return a + b\n" and info.finish_reason == "stop"
    assert sim.requests[0].path == "/v1/completions" and sim.requests[0].body["stream"] is True
