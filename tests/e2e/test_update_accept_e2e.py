"""Accepting an update's item (``u<request id>.<seq>``) over real stdio: it is counted,
retained and labelled for the confidence gate exactly as an answer's item.

A slow simulated cloud (20 tokens/s) over real HTTP on loopback, so the request is
answered with the start of the line and the rest follows as
``sidecar/inlineCompletionUpdate``; the client inserts the last update's item (as the
project's Neovim plugin does) and runs its command.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from conftest import client_capabilities, inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

URI = "file:///w/o.py"
LINE = "sum(item.price * item.quantity for item in items)"
DOC = "def order_total(items):\n    total = \n"  # cursor at (1, 12)


@pytest.fixture
async def slow():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=50, tokens_per_s=20, seed=4)) as s:
        yield s


def env(tmp_path, sim):
    return sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY="sk-upd",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_CACHE="false",
        SIDECAR_PREFETCH="false",
        SIDECAR_RETAINED_SHORT_S="1",
        SIDECAR_RETAINED_LONG_S="2",
        SIDECAR_GATE="true",
        SIDECAR_GATE_THRESHOLD="0",
    )


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def final_update(client) -> dict:
    t_end = time.monotonic() + 20
    while time.monotonic() < t_end:
        done = [u for _t, u in client.sidecar_updates if u["done"]]
        if done:
            items = [u["items"][0] for _t, u in client.sidecar_updates if u["items"]]
            assert items, "no update carried an item"
            return items[-1]
        await asyncio.sleep(0.05)
    raise AssertionError("no final update within 20 s")


async def test_accepting_an_updates_item_counts_its_characters_retention_and_gate_label(tmp_path, slow):
    slow.set_responder(lambda body: LINE)
    init = {"debounceMinMs": 0, "debounceMaxMs": 0, "inlineCompletionUpdates": True}
    async with sidecar(env(tmp_path, slow), init_options=init, capabilities=client_capabilities()) as client:
        open_doc(client, URI, DOC)
        r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 12)), 30)
        assert r is not None and r.items and r.items[0].insert_text != LINE, "expected an early part of the line"
        item = await final_update(client)
        assert item["insertText"] == LINE
        cmd = item["command"]
        assert cmd["arguments"][0].startswith("u"), cmd
        # The editor inserts the update's item, then runs its command.
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(1, 12), end=types.Position(1, 12)), text=LINE
                    )
                ],
            )
        )
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=cmd["command"], arguments=cmd["arguments"])
        )
        await asyncio.sleep(1.5)  # past the short retention horizon
        snap = await stats(client)
    acc = snap["acceptance"]
    assert acc["accepted"] == 1
    assert acc["accepted_chars"] == len(LINE)
    rows = {row["after"]: (row["accepted_chars"], row["retained_chars"]) for row in acc["retained"]}
    assert rows.get("1s") == (len(LINE), len(LINE)), acc["retained"]
    assert snap["gate"]["accepted"] == 1, snap["gate"]  # the gate got its label
    assert acc["shown"] == 1  # one suggestion shown, not one per update


async def test_a_suggestion_that_comes_only_as_updates_is_judged_and_labelled(tmp_path):
    """Answered with nothing at its 1 s deadline while a cold model loads (3 s), the
    request's suggestion follows as updates only: the gate judges it and the accept of
    its update item is its label, as for an answer with text."""
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=200, seed=4)) as sim:
        sim.set_responder(lambda body: LINE)
        sim.set_load_on_demand(3.0)
        env_ = sidecar_env(
            tmp_path,
            SIDECAR_API_KEY="sk-upd-cold",
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_PROVIDER="openai",
            SIDECAR_CACHE="false",
            SIDECAR_PREFETCH="false",
            SIDECAR_GATE="true",
            SIDECAR_GATE_THRESHOLD="0",
            SIDECAR_REQUEST_TIMEOUT_MS="1000",
        )
        init = {"debounceMinMs": 0, "debounceMaxMs": 0, "inlineCompletionUpdates": True}
        async with sidecar(env_, init_options=init, capabilities=client_capabilities()) as client:
            open_doc(client, URI, DOC)
            r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 12)), 30)
            assert r is None or not r.items, "answered with text before the model had loaded"
            item = await final_update(client)
            assert item["insertText"] == LINE
            cmd = item["command"]
            await client.workspace_execute_command_async(
                types.ExecuteCommandParams(command=cmd["command"], arguments=cmd["arguments"])
            )
            snap = await stats(client)
    assert snap["acceptance"]["accepted"] == 1 and snap["acceptance"]["accepted_chars"] == len(LINE)
    gate = snap["gate"]
    assert gate["unjudged"] + gate["shown"] == 1, gate  # judged once (no log-probabilities: unjudged)
    assert gate["accepted"] == 1, gate
