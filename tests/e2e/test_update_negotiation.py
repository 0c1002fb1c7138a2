"""Update negotiation: a client that renders ``sidecar/inlineCompletionUpdate`` says so at
``initialize`` and gets the first line early plus updates; any other client gets no stub.

A slow backend (20 tokens/s, so a line takes about a second) over real HTTP on loopback,
the sidecar over real stdio. Before the negotiation every client was answered with what
the stream had 250 ms after its first token (a stub), and a client that ignores the
updates (Neovim's native inline completion, Helix, any generic LSP client) kept the stub.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from conftest import client_capabilities, inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-negotiation"
LINE = "sum(item.price * item.quantity for item in items)"
BODY = "subtotal = sum(line.amount for line in lines)\n    tax = subtotal * rate\n    return subtotal + tax"
ONE_LINE_DOC = "def order_total(items):\n    total = \n"  # one line to finish: cursor at (1, 12)
BLOCK_DOC = "def invoice_total(lines, rate):\n    \n"  # a blank line in a block: lines allowed


@pytest.fixture
async def slow():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=50, tokens_per_s=20, seed=4)) as s:
        yield s


def env(tmp_path, sim):
    return sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")


async def ask(client, uri, line, col):
    t0 = time.monotonic()
    r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 30)
    return (r.items[0].insert_text if r is not None and r.items else None), time.monotonic() - t0


INIT = {"debounceMinMs": 0, "debounceMaxMs": 0}


@pytest.mark.parametrize("declared_by", ["capabilities", "initializationOptions", "initializationOptions.sidecar"])
async def test_a_client_that_declares_updates_gets_an_early_answer_and_updates(tmp_path, slow, declared_by):
    slow.set_responder(lambda body: LINE)
    caps = client_capabilities(updates=declared_by == "capabilities")
    init = dict(INIT)
    if declared_by == "initializationOptions":
        init["inlineCompletionUpdates"] = True
    elif declared_by == "initializationOptions.sidecar":  # the nested shape settings may take
        init = {"sidecar": dict(INIT, inlineCompletionUpdates=True)}
    async with sidecar(env(tmp_path, slow), init_options=init, capabilities=caps) as client:
        open_doc(client, "file:///w/o.py", ONE_LINE_DOC)
        first, _took = await ask(client, "file:///w/o.py", 1, 12)
        t_end = time.monotonic() + 20
        while not any(u["done"] for _t, u in client.sidecar_updates) and time.monotonic() < t_end:
            await asyncio.sleep(0.05)
        shown = [m.message for m in client.messages]
    finals = [u["items"][0]["insertText"] for _t, u in client.sidecar_updates if u["items"]]
    assert first and LINE.startswith(first) and first != LINE, f"expected an early part of the line, got {first!r}"
    assert finals and finals[-1] == LINE
    assert not any("inlineCompletionUpdates" in m for m in shown), shown  # not an unknown setting


async def test_a_client_without_updates_gets_the_whole_first_line(tmp_path, slow):
    slow.set_responder(lambda body: LINE)
    async with sidecar(
        env(tmp_path, slow), init_options=INIT, capabilities=client_capabilities(updates=False)
    ) as client:
        open_doc(client, "file:///w/o.py", ONE_LINE_DOC)
        first, took = await ask(client, "file:///w/o.py", 1, 12)
        await asyncio.sleep(0.3)
    assert first == LINE, f"a client that gets no updates was answered with a stub: {first!r}"
    assert took < 8.0
    assert client.sidecar_updates == []  # nothing it would not render


async def test_a_client_without_updates_gets_the_whole_block_where_lines_are_allowed(tmp_path, slow):
    slow.set_responder(lambda body: BODY)
    async with sidecar(
        env(tmp_path, slow), init_options=INIT, capabilities=client_capabilities(updates=False)
    ) as client:
        open_doc(client, "file:///w/b.py", BLOCK_DOC)
        first, _took = await ask(client, "file:///w/b.py", 1, 4)
    assert first == BODY, f"expected the whole suggestion, got {first!r}"


async def test_at_the_deadline_a_client_without_updates_gets_finished_lines_only(tmp_path, slow):
    """The block takes about 2 s, the deadline is 1.4 s: the answer holds only lines the
    model finished (the first, at about 1.2 s), never the line it was writing."""
    slow.set_responder(lambda body: BODY)
    init = dict(INIT, requestTimeoutMs=1400)
    async with sidecar(
        env(tmp_path, slow), init_options=init, capabilities=client_capabilities(updates=False)
    ) as client:
        open_doc(client, "file:///w/d.py", BLOCK_DOC)
        first, took = await ask(client, "file:///w/d.py", 1, 4)
        st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    lines = BODY.split("\n")
    finished = ["\n".join(lines[:k]) for k in range(1, len(lines))]
    assert first is None or first in finished, f"an unfinished line at the deadline: {first!r}"
    assert took < 1.4 + 0.5
    assert st["counters"].get("sched.request_deadline", 0) >= 1  # the deadline did cut this request
