"""Tests of the simulated SiliconFlow/OpenAI backend, through a real HTTP client (its
error bodies, latency model and faults alone: tests/unit/test_simulator.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from httpx2 import EventSource

from devtools.simulator import (
    SILICONFLOW_ERRORS,
    TRACE_HEADER,
    Fault,
    LatencyModel,
    SimulatedBackend,
    split_tokens,
)


@contextlib.asynccontextmanager
async def aconnect_sse(client, method, url, **kw):
    """A streamed request whose events are read with httpx2's EventSource."""
    async with client.stream(method, url, headers={"Accept": "text/event-stream"}, **kw) as resp:
        yield EventSource(resp)


CODE = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n"
FAST = LatencyModel(ttft_ms=2, ttft_jitter=0.0, tokens_per_s=2000, seed=0)
DISCONNECT_BUDGET_S = 0.05


@pytest.fixture
async def sim():
    async with SimulatedBackend(FAST) as backend:
        yield backend


@pytest.fixture
async def client():
    async with httpx.AsyncClient(timeout=5.0) as c:
        yield c


def completion_body(**extra):
    body = {"model": "Qwen/Qwen2.5-Coder-7B-Instruct", "prompt": "def add(", "suffix": "\n", "stream": True}
    body.update(extra)
    return body


async def read_stream(client, url, body):
    """POST a streaming request; return (events as dicts or raw strings, saw [DONE], response)."""
    events: list = []
    done = False
    async with aconnect_sse(client, "POST", url, json=body) as source:
        source.response.raise_for_status()
        async for sse in source.__aiter__():
            if sse.data == "[DONE]":
                done = True
                continue
            try:
                events.append(json.loads(sse.data))
            except ValueError:
                events.append(sse.data)
        return events, done, source.response


def completion_text(events):
    return "".join(e["choices"][0]["text"] for e in events if isinstance(e, dict) and e["choices"])


# -- happy paths -------------------------------------------------------------------


async def test_stream_reassembles_scripted_output(sim, client):
    sim.script([CODE, "second"])
    events, done, response = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert done
    assert completion_text(events) == CODE
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers[TRACE_HEADER]
    assert events[0]["choices"] == []  # the empty chunk clients must skip
    final = events[-1]
    assert final["choices"][0]["finish_reason"] == "stop"
    assert final["usage"]["completion_tokens"] == len(split_tokens(CODE))
    assert all(e["object"] == "text_completion" for e in events)

    events, _, second = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert completion_text(events) == "second"
    assert second.headers[TRACE_HEADER] != response.headers[TRACE_HEADER]

    first = sim.requests[0]
    assert first.completed and not first.disconnected and first.fault is None
    assert first.tokens_sent == first.tokens_total == len(split_tokens(CODE))
    assert first.text_sent == CODE
    assert first.body["suffix"] == "\n" and first.stream
    assert first.received_at <= first.first_token_at <= first.ended_at


async def test_stream_carries_keepalive_comment(sim, client):
    async with client.stream("POST", f"{sim.base_url}/completions", json=completion_body()) as response:
        raw = b"".join([chunk async for chunk in response.aiter_bytes()])
    assert raw.startswith(b": keep-alive\n\n")
    assert raw.endswith(b"data: [DONE]\n\n")


async def test_default_text_and_responder(sim, client):
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert completion_text(events) == sim.default_output

    sim.set_responder(lambda body: body["prompt"].upper())
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body(prompt="abc"))
    assert completion_text(events) == "ABC"

    async def slow_responder(body):
        await asyncio.sleep(0)
        return "async " + body["prompt"]

    sim.set_responder(slow_responder)
    sim.script(["scripted wins"])
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body(prompt="x"))
    assert completion_text(events) == "scripted wins"
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body(prompt="x"))
    assert completion_text(events) == "async x"


async def test_non_stream_completion(sim, client):
    sim.script([CODE])
    response = await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))
    assert response.status_code == 200
    data = response.json()
    assert data["choices"][0]["text"] == CODE
    assert data["choices"][0]["finish_reason"] == "stop"
    assert data["usage"]["completion_tokens"] == len(split_tokens(CODE))
    record = sim.requests[0]
    assert record.completed and record.tokens_sent == record.tokens_total


async def test_chat_stream_and_non_stream(sim, client):
    body = {
        "model": "deepseek-ai/DeepSeek-V3",
        "messages": [{"role": "user", "content": "complete"}],
        "prefix": "def f(",
        "suffix": "):\n",
        "stream": True,
    }
    sim.script(["x, y", "x, y"])
    events, done, _ = await read_stream(client, f"{sim.base_url}/chat/completions", body)
    assert done
    chunks = [e for e in events if e["choices"]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "x, y"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(e["object"] == "chat.completion.chunk" and e["model"] == "deepseek-ai/DeepSeek-V3" for e in events)

    response = await client.post(f"{sim.base_url}/chat/completions", json={**body, "stream": False})
    message = response.json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "x, y"}
    assert sim.requests[0].body["prefix"] == "def f(" and sim.requests[0].body["suffix"] == "):\n"


async def test_models_endpoint(sim, client):
    response = await client.get(f"{sim.base_url}/models")
    assert response.json() == {"object": "list", "data": [{"id": sim.model, "object": "model"}]}
    assert sim.requests[0].path == "/v1/models"


# -- stop and max_tokens -------------------------------------------------------------


async def test_stop_sequences_cut_output(sim, client):
    sim.script(["a = 1\nb = 2\n\ndef g():\n", "x = 1 # done"])
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body(stop=["\n\n", "\ndef"]))
    assert completion_text(events) == "a = 1\nb = 2"
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    # A single string is accepted too, and cuts inside a token piece.
    response = await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False, stop=" #"))
    assert response.json()["choices"][0]["text"] == "x = 1"


async def test_max_tokens_counts_pieces(sim, client):
    sim.script([CODE, CODE])
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body(max_tokens=4))
    assert completion_text(events) == "".join(split_tokens(CODE)[:4])
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 4
    # A stop sequence beyond the limit does not matter; the limit does.
    response = await client.post(
        f"{sim.base_url}/completions", json=completion_body(stream=False, max_tokens=2, stop=["print"])
    )
    assert response.json()["choices"][0]["finish_reason"] == "length"


async def test_more_than_four_stop_sequences_rejected(sim, client):
    response = await client.post(f"{sim.base_url}/completions", json=completion_body(stop=list("abcde")))
    assert response.status_code == 400
    data = response.json()
    assert set(data) == {"code", "message", "data"} and "stop" in data["message"]


# -- faults ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SILICONFLOW_ERRORS))
async def test_siliconflow_errors(sim, client, name):
    status, body = SILICONFLOW_ERRORS[name]
    sim.inject(Fault.siliconflow(name))
    sim.script(["after the error"])
    response = await client.post(f"{sim.base_url}/completions", json=completion_body())
    assert response.status_code == status
    assert response.headers[TRACE_HEADER]
    if isinstance(body, str):
        assert response.headers["content-type"].startswith("text/plain")
        assert response.text == body
    else:
        assert response.json() == body
    assert sim.requests[0].fault == "status"
    # One-shot: the next request succeeds and gets the script entry the error did not use.
    events, done, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert done and completion_text(events) == "after the error"


async def test_persistent_fault_until_cleared(sim, client):
    sim.inject(Fault.status(418, "teapot"), persistent=True)
    for _ in range(2):
        response = await client.post(f"{sim.base_url}/completions", json=completion_body())
        assert response.status_code == 418 and response.text == "teapot"
    # Faults default to the generation endpoints only.
    assert (await client.get(f"{sim.base_url}/models")).status_code == 200
    sim.clear_faults()
    response = await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))
    assert response.status_code == 200


async def test_fault_on_models_path(sim, client):
    sim.inject(Fault.siliconflow("overloaded").on("/v1/models"))
    response = await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))
    assert response.status_code == 200
    response = await client.get(f"{sim.base_url}/models")
    assert response.status_code == 503


async def test_cut_closes_mid_stream(sim, client):
    sim.script([CODE])
    sim.inject(Fault.cut(after_tokens=3))
    texts = []
    with pytest.raises(httpx.RemoteProtocolError):
        async with aconnect_sse(client, "POST", f"{sim.base_url}/completions", json=completion_body()) as source:
            async for sse in source.__aiter__():
                assert sse.data != "[DONE]"
                data = json.loads(sse.data)
                if data["choices"]:
                    texts.append(data["choices"][0]["text"])
    assert "".join(texts) == "".join(split_tokens(CODE)[:3])
    record = await sim.wait_for_end(0)
    assert record.fault == "cut" and record.tokens_sent == 3
    assert not record.completed and not record.disconnected
    # The server is fine afterwards.
    events, done, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert done


async def test_cut_non_stream_body(sim, client):
    sim.inject(Fault.cut(after_tokens=0))
    with pytest.raises(httpx.RemoteProtocolError):
        await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))


async def test_malformed_event_then_normal(sim, client):
    sim.script([CODE])
    sim.inject(Fault.malformed(after_tokens=2))
    events, done, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert done
    raw = [e for e in events if isinstance(e, str)]
    assert raw == ["{not json"]
    assert completion_text(events) == CODE
    position = events.index("{not json")
    assert len([e for e in events[:position] if e["choices"] and e["choices"][0]["text"]]) == 2
    assert sim.requests[0].fault == "malformed" and sim.requests[0].completed


# -- disconnects ---------------------------------------------------------------------


async def test_early_close_recorded_promptly(sim, client):
    sim.set_latency(LatencyModel(ttft_ms=2, tokens_per_s=200, seed=0))
    sim.script(["tok " * 100])
    got = 0
    async with aconnect_sse(client, "POST", f"{sim.base_url}/completions", json=completion_body()) as source:
        async for sse in source.__aiter__():
            data = json.loads(sse.data)
            if data["choices"]:
                got += 1
            if got == 3:
                break
        closed_at = time.monotonic()
    record = await sim.wait_for_disconnect(0, timeout=2.0)
    assert record.disconnected and not record.completed
    assert record.disconnected_at - closed_at < DISCONNECT_BUDGET_S
    assert 3 <= record.tokens_sent < record.tokens_total
    assert record.ended_at is not None


async def test_stall_then_client_close(sim, client):
    sim.script([CODE])
    sim.inject(Fault.stall(after_tokens=2))
    tokens = 0
    async with aconnect_sse(client, "POST", f"{sim.base_url}/completions", json=completion_body()) as source:
        events = source.__aiter__()
        while tokens < 2:
            if json.loads((await events.__anext__()).data)["choices"]:
                tokens += 1
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(events.__anext__(), 0.1)
        closed_at = time.monotonic()
    record = await sim.wait_for_disconnect(0, timeout=2.0)
    assert record.fault == "stall" and record.tokens_sent == 2
    assert record.disconnected_at - closed_at < DISCONNECT_BUDGET_S


async def test_stall_hits_client_read_timeout(sim):
    sim.inject(Fault.stall())
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.1)) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))
    record = await sim.wait_for_disconnect(0, timeout=2.0)
    assert record.tokens_sent == 0


async def test_stall_with_keepalives_defeats_read_timeout(sim):
    sim.inject(Fault.stall(after_tokens=1, keepalive_s=0.02))
    async with httpx.AsyncClient(timeout=httpx.Timeout(5.0, read=0.1)) as client:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(read_stream(client, f"{sim.base_url}/completions", completion_body()), 0.3)
    await sim.wait_for_disconnect(0, timeout=2.0)


async def test_wait_for_disconnect_rejects_completed_request(sim, client):
    await read_stream(client, f"{sim.base_url}/completions", completion_body())
    with pytest.raises(RuntimeError):
        await sim.wait_for_disconnect(0, timeout=1.0)
    with pytest.raises(TimeoutError):
        await sim.wait_for_requests(5, timeout=0.05)


async def test_stop_cancels_stalled_handler(client):
    backend = await SimulatedBackend(FAST).start()
    backend.inject(Fault.stall(after_tokens=1))
    request = asyncio.create_task(read_stream(client, f"{backend.base_url}/completions", completion_body()))
    await backend.wait_until(lambda: bool(backend.requests) and backend.requests[0].tokens_sent == 1)
    started = time.monotonic()
    await backend.stop()
    assert time.monotonic() - started < 1.0
    record = backend.requests[0]
    assert record.ended_at is not None and not record.disconnected and not record.completed
    with pytest.raises(httpx.HTTPError):
        await request
    await backend.stop()  # idempotent


# -- latency ------------------------------------------------------------------------


async def test_latency_paces_tokens(client):
    latency = LatencyModel(ttft_ms=60, tokens_per_s=100, seed=0)
    async with SimulatedBackend(latency, default_output="a b c d e f") as backend:  # 11 pieces
        started = time.monotonic()
        await read_stream(client, f"{backend.base_url}/completions", completion_body())
        elapsed = time.monotonic() - started
        record = backend.requests[0]
    assert record.first_token_at - record.received_at >= 0.055
    assert record.ended_at - record.first_token_at >= 0.095  # 10 intervals of 10 ms
    assert elapsed < 1.0


# -- auth, control endpoints, CLI ---------------------------------------------------------


async def test_api_key_and_redacted_headers(client):
    async with SimulatedBackend(FAST, api_key="sk-secret") as backend:
        response = await client.post(f"{backend.base_url}/completions", json=completion_body(stream=False))
        assert response.status_code == 401 and response.text == "Invalid token"
        response = await client.post(
            f"{backend.base_url}/completions",
            json=completion_body(stream=False),
            headers={"Authorization": "Bearer sk-secret"},
        )
        assert response.status_code == 200
        no_auth, with_auth = backend.requests
    assert not no_auth.auth_present
    assert with_auth.auth_present and with_auth.auth_scheme == "Bearer"
    assert "sk-secret" not in json.dumps(with_auth.to_dict())


async def test_control_endpoints(sim, client):
    url = sim.url
    assert (await client.post(f"{url}/_sim/script", json={"outputs": ["one", "two"]})).json() == {"pending_outputs": 2}
    latency = (await client.post(f"{url}/_sim/latency", json={"tokens_per_s": 500})).json()
    assert latency["tokens_per_s"] == 500 and latency["ttft_ms"] == FAST.ttft_ms
    assert (await client.post(f"{url}/_sim/fault", json={"siliconflow": "rate_limit_tpm"})).status_code == 200
    assert (await client.post(f"{url}/_sim/fault", json={"kind": "bogus"})).status_code == 400

    assert (await client.post(f"{sim.base_url}/completions", json=completion_body())).status_code == 429
    events, _, _ = await read_stream(client, f"{sim.base_url}/completions", completion_body())
    assert completion_text(events) == "one"

    records = (await client.get(f"{url}/_sim/requests")).json()
    assert [r["status"] for r in records] == [429, 200]
    assert records[1]["completed"] and records[0]["fault"] == "status"

    await client.post(f"{url}/_sim/fault", json={"kind": "status", "status_code": 503, "persistent": True})
    assert (await client.post(f"{sim.base_url}/completions", json=completion_body())).status_code == 503
    await client.post(f"{url}/_sim/reset")
    assert sim.requests == [] and sim.pending_outputs == 0 and sim.latency == FAST
    assert (await client.post(f"{sim.base_url}/completions", json=completion_body(stream=False))).status_code == 200
    assert sim.requests[0].index == 0


def test_cli_serves_until_sigterm(tmp_path: Path):
    url_file = tmp_path / "url"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "devtools.simulator", "--port", "0", "--ttft-ms", "1", "--url-file", str(url_file)],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        cwd=root,
    )
    try:
        deadline = time.monotonic() + 10
        while not (url_file.exists() and url_file.read_text().strip()):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.02)
        base_url = url_file.read_text().strip()
        response = httpx.post(f"{base_url}/completions", json=completion_body(stream=False), timeout=5)
        assert response.json()["choices"][0]["text"]
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0
    assert stdout == b""
    assert base_url.encode() in stderr


async def test_invalid_bodies_rejected_siliconflow_style(sim, client):
    response = await client.post(
        f"{sim.base_url}/completions", content=b"{oops", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400 and response.json()["data"] is None
    response = await client.post(f"{sim.base_url}/completions", json={"model": "m", "max_tokens": "9"})
    assert response.status_code == 400
    assert [r.status for r in sim.requests] == [400, 400]
