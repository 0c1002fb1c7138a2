"""Load-aware speculation: prefetch pauses while a shared backend's TTFT says it is
loaded, and comes back when it is idle again (sidecar/completion/load.py). The real
sidecar over stdio against the simulator; the busy rule alone is tests/unit/test_load.py."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(120)


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def test_prefetch_pauses_while_the_backend_is_loaded_and_resumes(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=40, tokens_per_s=2000, seed=5)) as sim:
        sim.set_responder(lambda body: "x + 1")
        env = sidecar_env(
            tmp_path,
            SILICONFLOW_API_KEY="sk-load",
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_CACHE="false",
            SIDECAR_PREFETCH="true",
        )
        init = {"debounceMinMs": 0, "debounceMaxMs": 0}
        async with sidecar(env, init_options=init) as client:
            n = 0

            async def ask_new():
                nonlocal n
                n += 1
                uri = f"file:///w/f{n}.py"
                open_doc(client, uri, f"def f{n}(x):\n    return \n")
                r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 1, 11)), 20)
                await asyncio.sleep(0.3)  # the prefetch after the shown suggestion runs
                return r

            for _ in range(10):
                await ask_new()
            idle = (await stats(client))["counters"]
            sim.set_latency(LatencyModel(ttft_ms=900, tokens_per_s=2000, seed=5))
            for _ in range(8):
                await ask_new()
            loaded = (await stats(client))["counters"]
            sim.set_latency(LatencyModel(ttft_ms=40, tokens_per_s=2000, seed=5))
            for _ in range(10):
                await ask_new()
            after = (await stats(client))["counters"]
    assert idle.get("prefetch.issued", 0) >= 5 and not idle.get("prefetch.skipped_load")
    assert loaded.get("prefetch.skipped_load", 0) >= 2, loaded
    # Once idle again, speculation comes back.
    assert after.get("prefetch.issued", 0) > loaded.get("prefetch.issued", 0), (loaded, after)


async def test_prompt_shrinks_and_drops_other_files_while_the_backend_is_loaded(tmp_path):
    # A long document (prefix well over 1024 tokens) and a second open document whose
    # definition the cursor line uses: idle prompts carry the full window and a snippet;
    # once the TTFTs say the engine is loaded, prompts are about half and carry no snippet;
    # idle again, both come back.
    body = "".join(f"def helper_{i}(value):\n    return value * {i} + {i % 7}\n\n" for i in range(200))
    other = "def shared_scale(v):\n    return v * 3\n"
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=40, tokens_per_s=2000, seed=5)) as sim:
        sim.set_responder(lambda body: "1")
        env = sidecar_env(
            tmp_path,
            SILICONFLOW_API_KEY="sk-load",
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_CACHE="false",
            SIDECAR_PREFETCH="false",
        )
        init = {"debounceMinMs": 0, "debounceMaxMs": 0, "crossfileTokens": 256}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, "file:///w/other.py", other)
            n = 0

            async def ask():
                nonlocal n
                n += 1
                uri = f"file:///w/f{n}.py"
                text = body + f"x{n} = shared_scale(\n"
                open_doc(client, uri, text)
                last = text.count("\n") - 1
                before = len(sim.requests)
                await asyncio.wait_for(
                    client.text_document_inline_completion_async(
                        inline_params(uri, last, len(f"x{n} = shared_scale("))
                    ),
                    20,
                )
                await asyncio.sleep(0.05)
                got = [r.body for r in completions(sim)[-(len(sim.requests) - before) :] if r.body]
                return got[-1] if got else None

            idle = [await ask() for _ in range(14)]
            sim.set_latency(LatencyModel(ttft_ms=900, tokens_per_s=2000, seed=5))
            loaded = [await ask() for _ in range(8)]
            sim.set_latency(LatencyModel(ttft_ms=40, tokens_per_s=2000, seed=5))
            recovered = [await ask() for _ in range(8)]
            counters = (await stats(client))["counters"]

    def size(b):
        return len(b.get("prompt", "")) + len(b.get("suffix", "") or "")

    def has_snippet(b):
        return "shared_scale(v)" in b.get("prompt", "")

    assert all(b is not None for b in idle + loaded + recovered)
    assert has_snippet(idle[-1]) and size(idle[-1]) > 3000
    # The last loaded prompts were cut while busy.
    assert not has_snippet(loaded[-1]), loaded[-1]["prompt"][:300]
    assert size(loaded[-1]) < 0.7 * size(idle[-1]), (size(loaded[-1]), size(idle[-1]))
    assert counters.get("context.shrunk_load", 0) >= 2, counters
    # Idle again: the full window and the snippet come back.
    assert has_snippet(recovered[-1]) and size(recovered[-1]) > 0.9 * size(idle[-1])


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("completions")]
