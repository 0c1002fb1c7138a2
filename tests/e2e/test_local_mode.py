"""Local mode with the real engine (llama-cpp-python + the shipped GGUF): privacy, mode
switches while typing, restart after the engine dies, and auto mode's fallback."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(240)
KEY = "sk-local-mode-test"
TEXT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "


@pytest.fixture
async def cloud():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as s:
        s.set_responder(lambda body: "fibonacci(n - 1) + fibonacci(n - 2)")
        yield s


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def command(client, name, *args):
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args))), 60
    )


async def ask(client, uri, line, col, timeout=120):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), timeout)


async def test_local_mode_sends_nothing_to_the_cloud(tmp_path, cloud):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=cloud.base_url, SIDECAR_MODE="local")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/f.py", TEXT)
        result = await ask(client, "file:///w/f.py", 3, 11)
        await asyncio.sleep(0.5)
        st = await stats(client)
    assert result is not None and result.items[0].insert_text.strip()
    assert st["status"]["side"] == "local"
    assert cloud.requests == []  # not a completion, not a prewarm, nothing


async def test_switch_modes_while_typing_loses_no_request(tmp_path, cloud):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=cloud.base_url)
    uri = "file:///w/t.py"
    async with sidecar(env, init_options={"debounceMinMs": 0, "debounceMaxMs": 0}) as client:
        open_doc(client, uri, TEXT + "\n")
        version, col = 1, 11
        answers, cloud_counts = [], []

        async def type_and_ask(n):
            nonlocal version, col
            futs = []
            for _ in range(n):
                version += 1
                pos = types.Position(3, col)
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                        content_changes=[types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text="f")],
                    )
                )
                col += 1
                futs.append(
                    asyncio.ensure_future(client.text_document_inline_completion_async(inline_params(uri, 3, col)))
                )
                await asyncio.sleep(0.05)
            return futs

        futs = await type_and_ask(5)  # cloud
        out = await command(client, "sidecar.setMode", "local")
        assert out["changed"] and out["mode"] == "local"
        cloud_counts.append(len(cloud.requests))
        futs += await type_and_ask(5)  # local (the engine starts on the way)
        futs.append(asyncio.ensure_future(ask(client, uri, 3, col)))
        answers = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 180)
        cloud_counts.append(len(cloud.requests))
        out = await command(client, "sidecar.toggleLocalGpu")  # back to cloud
        assert out["mode"] == "cloud"
        more = await type_and_ask(3)
        answers += await asyncio.wait_for(asyncio.gather(*more, return_exceptions=True), 60)
        statuses = list(client.sidecar_status)
    assert not [a for a in answers if isinstance(a, BaseException)]  # every request answered
    assert cloud_counts[0] == cloud_counts[1]  # nothing reached the cloud while local
    assert len(cloud.requests) > cloud_counts[1]  # and the cloud serves again after the toggle
    sides = [s.get("side") for s in statuses]
    assert "local" in sides and sides[-1] == "cloud"


async def test_killed_engine_restarts_with_one_message(tmp_path):
    env = sidecar_env(tmp_path)
    async with sidecar(env) as client:
        open_doc(client, "file:///w/k.py", TEXT)
        assert await ask(client, "file:///w/k.py", 3, 11) is not None
        pid = (await stats(client))["status"]["enginePid"]
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        open_doc(client, "file:///w/k2.py", TEXT.replace("fibonacci", "fib"))
        again = await ask(client, "file:///w/k2.py", 3, 11)
        new_pid = (await stats(client))["status"]["enginePid"]
        shown = [m.message for m in client.messages]
        logged = [m.message for m in client.log_messages]
    assert again is not None and again.items[0].insert_text.strip()
    assert new_pid and new_pid != pid
    # A restart is a notice in the log channel (window/logMessage), exactly one, and no popup.
    assert sum("restarting" in m for m in logged) == 1, logged
    assert not [m for m in shown if "engine" in m], shown


async def test_auto_prefers_local_and_falls_back_to_cloud(tmp_path, cloud):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=cloud.base_url, SIDECAR_MODE="auto")
    async with sidecar(env) as client:
        deadline = time.monotonic() + 120
        while (await stats(client))["status"]["side"] != "local":
            assert time.monotonic() < deadline, "auto mode never moved to the ready local engine"
            await asyncio.sleep(0.3)
        before = len([r for r in cloud.requests if r.path.endswith("completions")])
        open_doc(client, "file:///w/a.py", TEXT)
        local_answer = await ask(client, "file:///w/a.py", 3, 11)
        assert len([r for r in cloud.requests if r.path.endswith("completions")]) == before
        pid = (await stats(client))["status"]["enginePid"]
        os.kill(pid, signal.SIGKILL)
        await asyncio.sleep(0.5)
        open_doc(client, "file:///w/b.py", TEXT.replace("fibonacci", "fibo"))
        fallback = await ask(client, "file:///w/b.py", 3, 11)
        side_after = (await stats(client))["status"]["side"]
    assert local_answer is not None
    assert fallback is not None and fallback.items[0].insert_text == "fibonacci(n - 1) + fibonacci(n - 2)"
    assert side_after == "cloud"
    assert any("using the cloud backend" in m.message for m in client.messages)


async def ask_then_wait_for_update(client, uri, line, col, *, wait_s, what):
    """Ask once at (line, col) (0-based, UTF-16); returns the seconds the answer took,
    after a ``sidecar/inlineCompletionUpdate`` with items has come (fails after ``wait_s``
    seconds with ``what``)."""
    t0 = time.monotonic()
    await ask(client, uri, line, col)
    elapsed = time.monotonic() - t0
    deadline = time.monotonic() + wait_s
    while not any(u["items"] for _t, u in client.sidecar_updates):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)
    return elapsed


async def test_first_prompt_slower_than_the_deadline_still_comes_as_an_update(tmp_path):
    """The managed engine sends its headers before it reads the prompt. After a cold start
    the first prompt takes 1 s more (``slow_prompt``: a long prompt on a busy CPU) than
    the 300 ms deadline: the loader must run on to the first text, and its suggestion
    arrives as an update (it was cut 300 ms after the headers, and never came)."""
    env = sidecar_env(tmp_path, SIDECAR_REQUEST_TIMEOUT_MS="300", SIDECAR_ENGINE_FAULT="slow_prompt")
    async with sidecar(env, init_options={"temperature": 0}) as client:
        open_doc(client, "file:///w/c.py", TEXT)
        elapsed = await ask_then_wait_for_update(
            client, "file:///w/c.py", 3, 11, wait_s=30, what="the slow first prompt never produced a suggestion"
        )
        st = await stats(client)
    assert elapsed < 0.3 + 1.5, f"the first request took {elapsed:.2f} s"
    assert st["counters"].get("sched.loader_streams") == 1


async def test_short_deadline_never_cuts_off_a_cold_model_load(tmp_path):
    """The engine takes seconds to load; the request deadline is 300 ms. The LSP request is
    answered on time, the load goes on in the background, and its suggestion arrives as an
    update; asking again at the same place is answered from that stream at once."""
    env = sidecar_env(tmp_path, SIDECAR_REQUEST_TIMEOUT_MS="300")
    # Temperature 0: the tiny model's answer here is then always the same non-empty line.
    async with sidecar(env, init_options={"temperature": 0}) as client:
        open_doc(client, "file:///w/c.py", TEXT)
        elapsed = await ask_then_wait_for_update(
            client, "file:///w/c.py", 3, 11, wait_s=120, what="the cold load never produced a suggestion"
        )
        t1 = time.monotonic()
        again = await ask(client, "file:///w/c.py", 3, 11)
        again_s = time.monotonic() - t1
        pid = (await stats(client))["status"]["enginePid"]
        st = await stats(client)
    # The suggestion came as an update, so the first answer did not wait for the load;
    # the bound only says it was answered near its deadline (slack for a busy machine:
    # 0.82 s was seen with the CPU shared).
    assert elapsed < 0.3 + 1.5, f"the first request took {elapsed:.2f} s"
    assert again is not None and again.items[0].insert_text.strip()
    assert again_s < 0.3 + 1.5
    assert pid and st["counters"].get("sched.loader_streams") == 1
