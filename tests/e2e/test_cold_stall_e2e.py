"""The first stream of a session stalls on an OpenAI-compatible backend (issue scenarios A
and B): a cloud does not load models, so its silent first stream is a fault, not a model
load, and the next request goes upstream at once instead of waiting for it. Real stdio,
the simulated backend over loopback HTTP, nothing warmed up first."""

from __future__ import annotations

import asyncio

import pytest
from test_deadlines import completions, timed_ask
from test_deadlines import type_char as type_text

from conftest import open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)

TEXT = "def report(items):\n    total = \n"


@pytest.mark.parametrize("fault", [Fault.silent(), Fault.drip(1.0)], ids=["A-silent-10s", "B-drip-1-byte-per-s"])
async def test_after_a_stalled_first_stream_the_next_request_goes_upstream_at_once(tmp_path, fault):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=30, tokens_per_s=400, seed=3)) as sim:
        sim.set_responder(lambda body: "len(items)")
        sim.inject(fault)  # the first completion request only; every later one is healthy
        env = sidecar_env(
            tmp_path,
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_PROVIDER="openai",
            SIDECAR_CACHE="false",
            SIDECAR_API_KEY="sk-cold-stall-test-123456",
        )
        uri = "file:///w/report.py"
        async with sidecar(env, init_options={"debounceMinMs": 0, "debounceMaxMs": 0}) as client:
            open_doc(client, uri, TEXT)
            type_text(client, uri, 2, 1, 12, "s")
            first = asyncio.ensure_future(timed_ask(client, uri, 1, 13))
            await asyncio.sleep(1.5)
            type_text(client, uri, 3, 1, 13, "\n    result = ")
            second, took = await timed_ask(client, uri, 2, 13)
            _first, first_took = await first
        reqs = completions(sim)
    assert len(reqs) >= 2, "no new upstream request after the stalled one"
    assert second is not None and second.items and second.items[0].insert_text == "len(items)", second
    assert took < 1.5, f"the request after the stalled stream took {took:.2f} s"
    assert first_took < 8.0 + 0.5
