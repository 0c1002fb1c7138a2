"""The simulated shared engine over real HTTP: slots and queue, prefix cache, batching, 429s
(in process: tests/unit/test_shared_engine.py)."""

from __future__ import annotations

import asyncio
import time

import httpx2 as httpx
import pytest

from devtools.simulator import EngineConfig, SimulatedBackend
from support.shared_engine import completion_body

pytestmark = pytest.mark.timeout(60)

PROMPT = "def add(a, b):\n    return a + b\n\n" * 20  # about 400 tokens


async def _timed_stream(client: httpx.AsyncClient, url: str, body: dict) -> tuple[float, float, str]:
    """(seconds to the first data event with text, seconds to the end, text)."""
    t0 = time.monotonic()
    first = None
    text = ""
    async with client.stream("POST", f"{url}/completions", json=body) as resp:
        assert resp.status_code == 200
        async for line in resp.aiter_lines():
            if line.startswith("data: {") and '"text": "' in line and '"text": ""' not in line:
                if first is None:
                    first = time.monotonic() - t0
                text += line
    return (first if first is not None else time.monotonic() - t0), time.monotonic() - t0, text


async def _engine(sim: SimulatedBackend, **kw) -> None:
    cfg = {"overhead_ms": 0.0, "decode_tps": 200.0, "prefill_tps": 1e6, **kw}
    async with httpx.AsyncClient() as c:
        r = await c.post(f"{sim.url}/_sim/engine", json=cfg)
        assert r.status_code == 200, r.text
        assert r.json()["config"]["capacity"] == cfg.get("capacity", 8)


async def _stats(sim: SimulatedBackend) -> dict:
    async with httpx.AsyncClient() as c:
        return (await c.get(f"{sim.url}/_sim/engine")).json()


async def test_capacity_one_makes_the_second_request_wait_in_the_queue():
    out = "one two three four five six seven eight nine ten"
    async with SimulatedBackend(default_output=out) as sim:
        await _engine(sim, capacity=1, decode_tps=40.0)  # 10 words + spaces: ~20 steps = 0.5 s
        async with httpx.AsyncClient(timeout=10) as c:
            a, b = await asyncio.gather(
                _timed_stream(c, sim.base_url, completion_body("x = 1\n", max_tokens=64)),
                _timed_stream(c, sim.base_url, completion_body("y = 2\n", max_tokens=64)),
            )
        first, second = sorted([a, b])
        assert first[1] < 0.9
        # The second one only got a slot when the first had finished.
        assert second[0] >= first[1] - 0.05
        stats = await _stats(sim)
        assert stats["requests"] == 2 and stats["completed"] == 2
        assert stats["max_queue_length"] == 1 and stats["max_active"] == 1
        assert stats["queue_ms"]["samples"] == 2
        assert stats["queue_ms"]["p90"] >= 400  # the waiting one's queue time, ms
        assert 0.8 < stats["utilisation"] <= 1.0  # one slot busy nearly all the time


async def test_capacity_two_runs_both_at_once():
    async with SimulatedBackend(default_output="a b c d e f") as sim:
        await _engine(sim, capacity=2, decode_tps=40.0)
        async with httpx.AsyncClient(timeout=10) as c:
            a, b = await asyncio.gather(
                _timed_stream(c, sim.base_url, completion_body("x\n", 64)),
                _timed_stream(c, sim.base_url, completion_body("y\n", 64)),
            )
        assert abs(a[0] - b[0]) < 0.15
        stats = await _stats(sim)
        assert stats["max_queue_length"] == 0 and stats["max_active"] == 2


async def test_a_repeated_prompt_costs_less_prefill_than_a_new_one():
    async with SimulatedBackend(default_output="ok") as sim:
        await _engine(sim, prefill_tps=1000.0)  # ~400 tokens: ~0.4 s cold
        async with httpx.AsyncClient(timeout=10) as c:
            cold, _, _ = await _timed_stream(c, sim.base_url, completion_body(PROMPT))
            warm, _, _ = await _timed_stream(c, sim.base_url, completion_body(PROMPT))
            # The same prefix with a new line typed at the end: only the tail is new.
            edited, _, _ = await _timed_stream(c, sim.base_url, completion_body(PROMPT + "print(add(1, 2))"))
            other, _, _ = await _timed_stream(c, sim.base_url, completion_body(PROMPT.replace("add", "sub")))
        assert cold > 0.3
        assert warm < cold / 3
        assert edited < cold / 3
        assert other > 0.3  # a new prompt pays in full
        stats = await _stats(sim)
        assert stats["cached_tokens"] > 0
        assert stats["prefill_tokens"] + stats["cached_tokens"] == stats["prompt_tokens"]


async def test_decoding_slows_down_with_the_batch():
    cfg = EngineConfig(decode_tps=100.0, batch_slowdown=0.5)
    assert cfg.step_s(1) == pytest.approx(0.01)
    assert cfg.step_s(3) == pytest.approx(0.02)
    out = " ".join(["w"] * 20)  # 39 pieces
    async with SimulatedBackend(default_output=out) as sim:
        await _engine(sim, capacity=4, decode_tps=100.0, batch_slowdown=0.5)
        async with httpx.AsyncClient(timeout=10) as c:
            _, alone, _ = await _timed_stream(c, sim.base_url, completion_body("p\n", 64))
            results = await asyncio.gather(
                *(_timed_stream(c, sim.base_url, completion_body(f"q{i}\n", 64)) for i in range(4))
            )
        together = max(r[1] for r in results)
        assert together > alone * 1.8  # 4 at once: each step 2.5x as long
        assert (await _stats(sim))["generated_tokens"] == 5 * 40  # 39 pieces + the stop token each


async def test_a_client_leaving_the_queue_never_runs():
    async with SimulatedBackend(default_output=" ".join(["w"] * 30)) as sim:
        await _engine(sim, capacity=1, decode_tps=50.0)
        async with httpx.AsyncClient(timeout=10) as c:
            long = asyncio.ensure_future(_timed_stream(c, sim.base_url, completion_body("a\n", 64)))
            await asyncio.sleep(0.1)
            leaver = asyncio.ensure_future(_timed_stream(c, sim.base_url, completion_body("b\n", 64)))
            await asyncio.sleep(0.2)
            assert sim.engine is not None and sim.engine.queued == 1
            leaver.cancel()
            with pytest.raises(asyncio.CancelledError):
                await leaver
            await sim.wait_until(lambda: sim.engine.queued == 0, timeout=2)
            await long
        stats = await _stats(sim)
        assert stats["abandoned_in_queue"] == 1
        assert stats["requests"] == 1 and stats["completed"] == 1


async def test_rpm_limit_answers_429_with_retry_after_and_is_counted():
    async with SimulatedBackend(default_output="ok") as sim:
        await _engine(sim)
        sim.set_rate_limits(rpm=2)
        async with httpx.AsyncClient(timeout=10) as c:
            codes = []
            for _ in range(3):
                r = await c.post(f"{sim.base_url}/completions", json=completion_body("x\n", stream=False))
                codes.append(r.status_code)
            assert codes == [200, 200, 429]
            assert int(r.headers["Retry-After"]) >= 1
            assert "RPM" in r.text
        stats = await _stats(sim)
        assert stats["rate_limited"] == 1
        assert stats["requests"] == 2  # the refused one never reached the engine
        async with httpx.AsyncClient() as c:
            await c.post(f"{sim.url}/_sim/engine/reset")
        assert (await _stats(sim))["rate_limited"] == 0


async def test_non_streaming_requests_use_the_engine_and_reset_removes_it():
    async with SimulatedBackend(default_output="return a + b") as sim:
        await _engine(sim, prefill_tps=500.0)
        async with httpx.AsyncClient(timeout=10) as c:
            t0 = time.monotonic()
            r = await c.post(f"{sim.base_url}/completions", json=completion_body(PROMPT, 16, stream=False))
            assert r.status_code == 200 and r.json()["choices"][0]["text"] == "return a + b"
            assert time.monotonic() - t0 > 0.6  # ~400 prompt tokens at 500 tokens/s
            assert (await c.post(f"{sim.url}/_sim/engine", json={"capacity": 0})).status_code == 400
            assert (await c.post(f"{sim.url}/_sim/engine", json={"bogus": 1})).status_code == 400
            assert (await c.post(f"{sim.url}/_sim/engine", json={"enabled": False})).json() is None
            assert sim.engine is None
            await c.post(f"{sim.url}/_sim/engine", json={})
            assert sim.engine is not None
            await c.post(f"{sim.url}/_sim/reset")
            assert sim.engine is None and (await c.get(f"{sim.url}/_sim/engine")).json() is None
