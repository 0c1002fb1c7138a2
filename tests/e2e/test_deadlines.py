"""Every LSP request is answered within its deadline, whatever the backend does: a stall
before the first token, a drip of keep-alive bytes, a stall that then recovers. Real stdio,
the simulated backend over loopback HTTP."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-deadlines-0123456789"
DEADLINE_MS = 1500
TEXT = "def area(w, h):\n    return \n"
INIT = {"requestTimeoutMs": DEADLINE_MS, "debounceMinMs": 0, "debounceMaxMs": 0}


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=30, tokens_per_s=400, seed=3)) as s:
        s.set_responder(lambda body: "w * h")
        yield s


def env(tmp_path, sim):
    return sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("/completions")]


def type_char(client, uri, version, line, col, ch):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=line, character=col), end=types.Position(line=line, character=col)
                    ),
                    text=ch,
                )
            ],
        )
    )


async def timed_ask(client, uri, line, col):
    t0 = time.monotonic()
    r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 30)
    return r, time.monotonic() - t0


async def warm_up(client, sim, uri):
    """One healthy completion first: the backend is then warm (not loading a model)."""
    open_doc(client, uri, TEXT)
    r, _ = await timed_ask(client, uri, 1, 11)
    assert r is not None and r.items[0].insert_text == "w * h"


@pytest.mark.parametrize(
    "fault",
    [Fault.stall(after_tokens=0), Fault.stall(after_tokens=0, keepalive_s=1.0)],
    ids=["stall-before-first-token", "drip-1-per-s"],
)
async def test_stalled_backend_every_request_answered_on_time(tmp_path, sim, fault):
    uri = "file:///w/stall.py"
    async with sidecar(env(tmp_path, sim), init_options=INIT) as client:
        await warm_up(client, sim, uri)
        sim.inject(fault, persistent=True)
        pending = []
        for i, ch in enumerate("h +"):  # not what the warm-up suggested: new streams
            type_char(client, uri, 2 + i, 1, 11 + i, ch)
            pending.append(asyncio.ensure_future(timed_ask(client, uri, 1, 12 + i)))
            await asyncio.sleep(0.4)
        answers = await asyncio.gather(*pending)
        await asyncio.sleep(0.5)
        stalled = [r for r in completions(sim) if r.fault == "stall"]
    assert answers and all(took < DEADLINE_MS / 1000 + 0.5 for _r, took in answers), answers
    assert stalled and all(r.disconnected for r in stalled), "a stalled stream outlived its deadline"


async def test_after_a_stall_the_next_request_goes_out_at_once(tmp_path, sim):
    uri = "file:///w/recover.py"
    # A long deadline, so that the stalled stream is still running when the user goes on.
    async with sidecar(env(tmp_path, sim), init_options={**INIT, "requestTimeoutMs": 4000}) as client:
        await warm_up(client, sim, uri)
        sim.inject(Fault.stall(after_tokens=0), persistent=True)
        type_char(client, uri, 2, 1, 11, "h")
        stalled = asyncio.ensure_future(timed_ask(client, uri, 1, 12))
        await asyncio.sleep(0.3)
        sim.clear_faults()  # the backend is healthy again
        await asyncio.sleep(1.4)  # the stalled stream has had no token for 1.7 s
        # A new line: an empty stream "agrees" with it, but a dead one must not be joined.
        type_char(client, uri, 3, 1, 12, "\n    ")
        recovered, took = await timed_ask(client, uri, 2, 4)
        first, first_took = await stalled
    assert first_took < 4.0 + 0.5
    assert recovered is not None and recovered.items[0].insert_text == "w * h"
    assert took < 0.5, f"the first suggestion after recovery took {took:.2f} s"
