"""The backend's health follows what its streams did, over real stdio (service.py
``_record``): a stream that failed for a cause the user must act on (a rejected key)
makes ``sidecar/status`` and ``sidecar.stats`` say ``error``, not ``ready``; the next
stream that works makes them ``ready`` again."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)
URI = "file:///w/health.py"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=3)) as s:
        s.set_responder(lambda body: "w * h")
        yield s


async def health(client) -> str:
    snap = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    return snap["status"]["health"]


async def ask(client, line=1, col=4):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, line, col)), 20)


async def test_a_rejected_key_is_an_error_until_a_stream_works(tmp_path, sim):
    env = sidecar_env(
        tmp_path, SIDECAR_PROVIDER="openai", SIDECAR_BASE_URL=sim.base_url, SIDECAR_API_KEY="sk-health-1234567"
    )
    async with sidecar(env) as client:
        open_doc(client, URI, "def area(w, h):\n    \n\n\n")
        for _ in range(100):  # the start-up status: a cloud is ready at once
            if await health(client) == "ready":
                break
            await asyncio.sleep(0.02)
        assert await health(client) == "ready"
        sim.inject(Fault.status(401, {"error": {"message": "Invalid API key"}}))
        assert await ask(client) is None
        rejected = await health(client)
        sent = [s.get("health") for s in client.sidecar_status]
        r = await ask(client, 2, 0)  # the key works again (the server fixed it)
        for _ in range(100):
            if await health(client) == "ready":
                break
            await asyncio.sleep(0.02)
        recovered = await health(client)
    assert rejected == "error" and sent[-1] == "error", (rejected, sent)
    assert r is not None and recovered == "ready"
