"""A cold model behind an OpenAI-compatible URL (a serverless endpoint, or vLLM / Ollama
behind a ``/v1`` URL, waking up): the first request's time to first token is a 12 s
model load, longer than the 8 s request deadline. The simulated backend over real HTTP
on loopback drops the load when every waiting request has disconnected (as an engine
that loads on demand does); the sidecar over real stdio, nothing warmed up first.

The first stream must run on in the background past its request's deadline (the load
is not cut off and started again), later requests must not wait for it, and its text
must reach the request the editor shows now, as an update. A true stall on a cloud
(``test_cold_stall_e2e.py``) still holds nothing.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from test_deadlines import completions, timed_ask

from conftest import open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

URI = "file:///w/load.py"
TEXT = "def total(xs):\n    return "


def responder(body):
    """The rest of ``sum(xs)`` after what the prompt already has after ``return ``."""
    typed = str(body.get("prompt", "")).rpartition("return ")[2]
    return "sum(xs)"[len(typed) :] if "sum(xs)".startswith(typed) else "0"


def type_key(client, version, col, ch):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(
                        start=types.Position(line=1, character=col), end=types.Position(line=1, character=col)
                    ),
                    text=ch,
                )
            ],
        )
    )


def cloud_env(tmp_path, sim, **extra):
    return sidecar_env(
        tmp_path,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_PROVIDER="openai",
        SIDECAR_API_KEY="sk-cold-load-test-123456",
        SIDECAR_CACHE="false",
        SIDECAR_TOKEN_HEALING="false",
        **extra,
    )


async def test_a_cold_model_behind_a_cloud_url_loads_once_and_its_suggestion_follows(tmp_path):
    """Three keys, then a 15 s wait: the suggestion arrives as an update for the third
    request (answered on time with nothing), the model loads once."""
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=200, seed=2)) as sim:
        sim.set_responder(responder)
        sim.set_load_on_demand(12.0)
        async with sidecar(cloud_env(tmp_path, sim)) as client:
            open_doc(client, URI, TEXT)
            pending = []
            t_start = time.monotonic()
            for i, ch in enumerate("sum"):
                type_key(client, 2 + i, 11 + i, ch)
                pending.append(asyncio.ensure_future(timed_ask(client, URI, 1, 12 + i)))
                await asyncio.sleep(0.15)
            answers = await asyncio.gather(*pending)
            while not any(u["done"] for _t, u in client.sidecar_updates) and time.monotonic() - t_start < 15:
                await asyncio.sleep(0.05)
            updates = [u for _t, u in client.sidecar_updates if u["items"]]
            again, again_s = await timed_ask(client, URI, 1, 14)
        assert all(took < 8.0 + 0.5 for _r, took in answers), [took for _r, took in answers]
        assert updates, (
            f"no suggestion within 15 s (loads started {sim.loads_started}, completed {sim.loads_completed})"
        )
        last = client.sidecar_updates[-1][1]
        assert last["done"] and updates[-1]["items"][0]["insertText"] == "(xs)", last
        # It reached the request the editor shows now: the third key's (version 4, column 14).
        assert (last["version"], last["position"]) == (4, {"line": 1, "character": 14}), last
        assert again is not None and again.items and again.items[0].insert_text == "(xs)" and again_s < 1.5
        assert sim.loads_started == 1 and sim.loads_completed == 1


async def test_while_a_cloud_model_loads_a_later_request_goes_upstream_at_once(tmp_path):
    """The silent first stream runs in the background; the next request is not held by
    it (it sends its own request upstream at once, which waits in the backend's queue)."""
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=200, seed=2)) as sim:
        sim.set_responder(responder)
        sim.set_load_on_demand(4.0)
        async with sidecar(cloud_env(tmp_path, sim), init_options={"debounceMinMs": 0, "debounceMaxMs": 0}) as client:
            open_doc(client, URI, TEXT)
            type_key(client, 2, 11, "s")
            first = asyncio.ensure_future(timed_ask(client, URI, 1, 12))
            await asyncio.sleep(1.5)
            type_key(client, 3, 12, "x")  # off the model's path: the first stream no longer agrees
            t_sent = time.monotonic()
            second = asyncio.ensure_future(timed_ask(client, URI, 1, 13))
            while len(completions(sim)) < 2 and time.monotonic() - t_sent < 3:
                await asyncio.sleep(0.02)
            went_up_s = time.monotonic() - t_sent
            await asyncio.gather(first, second)
        assert len(completions(sim)) >= 2
        assert went_up_s < 1.0, f"the second request went upstream {went_up_s:.2f} s after it was sent"
        assert sim.loads_started == 1
