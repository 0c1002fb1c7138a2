"""Rate limits and overload (issue 15): Retry-After is honoured, nothing goes upstream
inside the window, prefetch pauses, one message per episode, recovery at once after it.
The simulator's limits over loopback HTTP, and the real sidecar over stdio against it;
the parser and the cool-down state machine are tests/unit/test_rate_limits.py."""

from __future__ import annotations

import asyncio
import time

import httpx2 as httpx
import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-ratelimits-0123456789"
INIT = {"debounceMinMs": 0, "debounceMaxMs": 0}


async def test_simulator_rpm_and_tpm_limits_answer_429_with_retry_after():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=1, tokens_per_s=5000, seed=1)) as sim:
        async with httpx.AsyncClient(base_url=sim.base_url + "/", trust_env=False) as client:
            body = {"model": "m", "prompt": "x", "max_tokens": 4}
            sim.set_rate_limits(rpm=2)
            codes = [(await client.post("completions", json=body)).status_code for _ in range(2)]
            third = await client.post("completions", json=body)
            assert codes == [200, 200] and third.status_code == 429
            assert 55 <= int(third.headers["Retry-After"]) <= 60
            assert "RPM limit" in third.json()["message"]
            # Through the control endpoint: a token limit with a fixed wait.
            r = await client.post(sim.url + "/_sim/rate_limits", json={"tpm": 30, "retry_after_s": 7})
            assert r.json()["tpm"] == 30
            ok = await client.post("completions", json={**body, "max_tokens": 20})
            over = await client.post("completions", json={**body, "max_tokens": 20})
            assert ok.status_code == 200 and over.status_code == 429
            assert over.headers["Retry-After"] == "7" and "TPM limit" in over.json()["message"]
            sim.set_rate_limits(rpm=1, send_retry_after=False)
            await client.post("completions", json=body)
            silent = await client.post("completions", json=body)
            assert silent.status_code == 429 and "Retry-After" not in silent.headers
            # One-shot fault with an HTTP-date.
            sim.set_rate_limits()
            sim.inject(Fault.rate_limited("Wed, 21 Oct 2015 07:28:00 GMT", "TPM"))
            dated = await client.post("completions", json=body)
            assert dated.status_code == 429 and dated.headers["Retry-After"] == "Wed, 21 Oct 2015 07:28:00 GMT"
    assert [r.fault for r in sim.requests].count("rate_limit") == 3


# --------------------------------------------------------------------------- LSP
@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=30, tokens_per_s=400, seed=3)) as s:
        s.set_responder(lambda body: "compute()")
        yield s


def env(tmp_path, sim, **extra):
    return sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false", **extra)


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("/completions")]


def type_text(client, uri, version, line, col, text):
    pos = types.Position(line=line, character=col)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(start=pos, end=pos), text=text)],
        )
    )


async def ask(client, uri, line, col):
    t0 = time.monotonic()
    r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 20)
    return r, time.monotonic() - t0


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def type_keys(client, uri, keys, start_version, col, every_s):
    """Type ``keys`` on line 0 from ``col``, asking for a completion after each key, one
    key every ``every_s`` seconds (an editor does not wait for the answer)."""
    pending = []
    for i, ch in enumerate(keys):
        type_text(client, uri, start_version + i, 0, col + i, ch)
        pending.append(asyncio.ensure_future(ask(client, uri, 0, col + i + 1)))
        await asyncio.sleep(every_s)
    return await asyncio.gather(*pending)


@pytest.mark.parametrize("every", [False, True], ids=["first-request", "every-request"])
async def test_retry_after_window_is_honoured_then_recovery_at_once(tmp_path, sim, every):
    window_s = 2.5
    uri = "file:///w/rl.py"
    sim.inject(Fault.rate_limited(window_s, "RPM"), persistent=every)
    async with sidecar(env(tmp_path, sim), init_options=INIT) as client:
        open_doc(client, uri, "x = \n")
        first, _ = await ask(client, uri, 0, 4)
        t_429 = time.monotonic()
        assert first is None
        answers = await type_keys(client, uri, "abcdefghijklmnopqrst", 2, 4, 0.1)  # 20 keys in 2 s
        inside = [r for r in completions(sim) if t_429 < r.received_at < t_429 + window_s - 0.1]
        assert len(inside) <= 1, [(round(r.received_at - t_429, 2), r.status) for r in inside]
        assert all(r is None and took < 0.5 for r, took in answers), answers  # nothing, and fast
        await asyncio.sleep(max(0.0, t_429 + window_s + 0.05 - time.monotonic()))
        if every:
            sim.clear_faults()
        type_text(client, uri, 30, 0, 24, " ")
        after, took = await ask(client, uri, 0, 25)
        st = await stats(client)
        await asyncio.sleep(0.2)
        shown = [m.message for m in client.messages if "rate limited" in m.message]
    assert after is not None and after.items[0].insert_text == "compute()"
    assert took < 0.5, f"the first suggestion after the window took {took:.2f} s"
    assert len(shown) == 1, shown
    assert KEY not in shown[0]
    assert st["counters"].get("upstream.rate_limited_skipped", 0) >= 15, st["counters"]


async def test_without_retry_after_backs_off_exponentially(tmp_path, sim):
    uri = "file:///w/backoff.py"
    sim.inject(Fault.siliconflow("rate_limit_tpm"), persistent=True)  # no header, as SiliconFlow documents
    async with sidecar(env(tmp_path, sim), init_options=INIT) as client:
        open_doc(client, uri, "x = \n")
        await ask(client, uri, 0, 4)
        t0 = time.monotonic()
        await type_keys(client, uri, "abcdefghijklmnopqrstuvwxyzabcd", 2, 4, 0.1)  # 3 s of typing
        elapsed = time.monotonic() - t0
        await asyncio.sleep(0.2)
        shown = [m.message for m in client.messages if "rate limited" in m.message]
    sent = completions(sim)
    # Waits of 1 s, then 2 s (each +-20 %): at most 3 requests in the first ~3.3 s, where
    # one per keystroke would have sent 31.
    assert len(sent) <= 3 and elapsed < 4.5, [round(r.received_at - sent[0].received_at, 2) for r in sent]
    gaps = [b.received_at - a.received_at for a, b in zip(sent, sent[1:])]
    assert all(g >= 0.75 for g in gaps), gaps
    assert len(shown) == 1, shown


async def test_prefetch_pauses_while_limited_and_resumes_after(tmp_path, sim):
    uri = "file:///w/pf.py"
    e = env(tmp_path, sim, SIDECAR_PREFETCH="true")
    e.pop("SIDECAR_CACHE")  # the cache answers while the backend is limited
    async with sidecar(e, init_options=INIT) as client:
        open_doc(client, uri, "x = \n")
        ok, _ = await ask(client, uri, 0, 4)
        assert ok is not None
        await sim.wait_until(lambda: len(completions(sim)) >= 2 and completions(sim)[1].ended_at, timeout=5)
        before = (await stats(client))["counters"]
        assert before.get("prefetch.issued", 0) == 1  # speculated after the shown text
        sim.inject(Fault.rate_limited(2.0, "TPM"), persistent=True)
        type_text(client, uri, 2, 0, 4, "q")
        limited, _ = await ask(client, uri, 0, 5)
        t_429 = time.monotonic()
        assert limited is None
        # Backspace: the cache answers (no upstream request), and speculation would follow.
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(0, 4), end=types.Position(0, 5)), text=""
                    )
                ],
            )
        )
        cached, _ = await ask(client, uri, 0, 4)
        await asyncio.sleep(0.3)
        during = (await stats(client))["counters"]
        inside = [r for r in completions(sim) if t_429 < r.received_at < t_429 + 1.9]
        await asyncio.sleep(max(0.0, t_429 + 2.05 - time.monotonic()))
        sim.clear_faults()
        n_before = len(completions(sim))
        type_text(client, uri, 4, 0, 4, " ")  # (a letter would be token-healed: the model must rewrite it)
        back, _ = await ask(client, uri, 0, 5)
        await sim.wait_until(lambda: len(completions(sim)) >= n_before + 2, timeout=5)  # user request + prefetch
        after = (await stats(client))["counters"]
    assert cached is not None and cached.items[0].insert_text == "compute()"
    assert not inside, "nothing (prefetch included) goes upstream inside the window"
    assert during.get("prefetch.skipped_limited", 0) >= 1, during
    assert during.get("prefetch.issued", 0) == before.get("prefetch.issued", 0)
    assert back is not None
    assert after.get("prefetch.issued", 0) > during.get("prefetch.issued", 0)


async def test_simulator_rpm_limit_through_the_sidecar(tmp_path, sim):
    """A shared key with an RPM budget: the sidecar uses what the limit allows, then
    waits out the Retry-After instead of sending one request per keystroke."""
    uri = "file:///w/rpm.py"
    sim.set_rate_limits(rpm=3, retry_after_s=2)
    async with sidecar(env(tmp_path, sim), init_options=INIT) as client:
        open_doc(client, uri, "x = \n")
        await type_keys(client, uri, "abcdefghijklmnopqrst", 2, 4, 0.08)  # 20 keys in 1.6 s
        await asyncio.sleep(0.2)
    statuses = [r.status for r in completions(sim)]
    assert statuses.count(429) == 1 and len(statuses) == 4, statuses
