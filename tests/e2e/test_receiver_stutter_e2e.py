"""The repeated receiver (``Validate.`` then ``Validate.notNull``) over real stdio,
against the simulated backend on loopback (postprocess/receiver_stutter.py)."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(120)


def env_for(tmp_path, sim):
    # Token healing off: the responder matches the exact prompt ending.
    return sidecar_env(
        tmp_path, SILICONFLOW_API_KEY="sk-r", SIDECAR_BASE_URL=sim.base_url, SIDECAR_TOKEN_HEALING="false"
    )


def responder(body):
    p = body["prompt"]
    if p.endswith("Validate."):
        return "Validate.notNull(context);"
    if p.endswith("r.data."):
        return "data.items"
    return ""


async def ask(client, uri, line, col):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 20)


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def test_the_repeated_receiver_is_stripped_unless_the_file_doubles_it(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=400, seed=1), responder=responder) as sim:
        async with sidecar(env_for(tmp_path, sim)) as client:
            open_doc(client, "file:///w/a.py", "def f(context):\n    Validate.\n")
            stripped = await ask(client, "file:///w/a.py", 1, 13)
            # response.data.data is real in this file: "data." is not a stutter here.
            open_doc(client, "file:///w/b.py", "x = r.data.data.size\ny = r.data.\n")
            kept = await ask(client, "file:///w/b.py", 1, 11)
            st = await stats(client)
    assert stripped.items[0].insert_text == "notNull(context);"
    assert kept.items[0].insert_text == "data.items"
    assert st["counters"]["postprocess.receiver_stutter"] == 1
