"""Speculative prefetch over real stdio against the simulated backend."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.completion import tokens

pytestmark = pytest.mark.timeout(120)
URI = "file:///w/p.py"


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("completions")]


def env_for(tmp_path, sim, **extra):
    extra.setdefault("SIDECAR_PREFETCH", "true")
    # The responders match exact prompt endings ("* r * r"); token healing would cut the
    # partial word " r" off the prompt (tests/unit/test_healing.py covers that), so it is off.
    return sidecar_env(
        tmp_path, SILICONFLOW_API_KEY="sk-p", SIDECAR_BASE_URL=sim.base_url, SIDECAR_TOKEN_HEALING="false", **extra
    )


def responder(body):
    """A model that knows this little function: each prompt's natural continuation."""
    p = body["prompt"]
    if p.endswith("def area(r):\n    "):
        return "result = 3.14159 * r * r"
    if p.endswith("result = 3.14159 * r * r"):
        return "\n    return result"
    if p.endswith("result = 3.14159 * r * r\n    "):
        return "return result"
    return "pass"


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def ask(client, line, col):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, line, col)), 20)


def insert(client, version, line, col, text):
    pos = types.Position(line, col)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=text)],
        )
    )


async def accept(client, item):
    await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
    )


async def test_accepting_a_shown_suggestion_needs_no_new_upstream_request(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=40, tokens_per_s=200, seed=1), responder=responder) as sim:
        async with sidecar(env_for(tmp_path, sim)) as client:
            open_doc(client, URI, "import math\n\ndef area(r):\n    \n")
            first = await ask(client, 3, 4)
            item = first.items[0]
            assert item.insert_text == "result = 3.14159 * r * r"
            # The prefetch for "after accepting" runs while the user looks at the ghost text.
            await sim.wait_until(lambda: len(completions(sim)) >= 2 and completions(sim)[1].ended_at, timeout=5)
            before = len(completions(sim))
            insert(client, 2, 3, 4, item.insert_text)  # the editor applies the accepted text
            await accept(client, item)
            after_accept = await ask(client, 3, 4 + len(item.insert_text))  # the editor asks again at once
            insert(client, 3, 3, 4 + len(item.insert_text), "\n    ")  # Enter, with auto-indent
            next_line = await ask(client, 4, 4)
            await asyncio.sleep(0.2)
            st = await stats(client)
    assert before == 2  # the user's request and one prefetch
    assert after_accept.items[0].insert_text == "\n    return result"
    assert next_line.items[0].insert_text == "return result"
    prompts = [r.body["prompt"] for r in completions(sim)]
    # No new upstream request for either: the prefetch answered both. (What follows is
    # the next speculation, after the line now shown: "return result".)
    assert prompts[1].endswith("result = 3.14159 * r * r")
    assert not any(p.endswith(("* r * r", "* r * r\n    ")) for p in prompts[2:]), prompts
    assert all(p.endswith("return result") for p in prompts[2:]), prompts
    assert st["prefetch"]["used"] == 1 and st["prefetch"]["issued"] == len(prompts) - 1
    assert st["acceptance"]["accepted"] == 1 and st["acceptance"]["accepted_chars"] == len(item.insert_text)
    assert st["acceptance"]["rate"] > 0


async def test_diverging_cancels_the_prefetch_stream(tmp_path):
    slow_next = "\n    return result  # " + "explained at length " * 30

    def resp(body):
        return slow_next if body["prompt"].endswith("* r * r") else responder(body)

    async with SimulatedBackend(latency=LatencyModel(ttft_ms=30, tokens_per_s=15, seed=1), responder=resp) as sim:
        sim.set_latency(LatencyModel(ttft_ms=30, tokens_per_s=400, seed=1))
        async with sidecar(env_for(tmp_path, sim)) as client:
            open_doc(client, URI, "import math\n\ndef area(r):\n    \n")
            await ask(client, 3, 4)
            sim.set_latency(LatencyModel(ttft_ms=30, tokens_per_s=15, seed=1))  # the prefetch streams slowly
            await sim.wait_until(lambda: len(completions(sim)) >= 2 and completions(sim)[1].tokens_sent >= 2, timeout=5)
            insert(client, 2, 3, 4, "#")  # not what was shown
            await ask(client, 3, 5)
            rec = await sim.wait_for_disconnect(completions(sim)[1].index, timeout=5)
            st = await stats(client)
    assert rec.disconnected and not rec.completed
    assert st["prefetch"]["cancelled"] >= 1 and st["prefetch"]["wasted"] >= 1


async def test_budget_caps_prefetch_under_a_burst(tmp_path):
    """What a prefetch costs stays spent (its prompt and what it generated); the rest of
    its reservation (``max_tokens``) comes back when it ends. Prompts of about 100
    tokens under a 400-token budget: a burst of 12 gets at most 4."""
    budget = 400
    head = "# " + " ".join(f"word{j}" for j in range(40)) + "\n"
    async with SimulatedBackend(
        latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=1), responder=lambda b: "x + 1"
    ) as sim:
        env = env_for(tmp_path, sim)
        async with sidecar(env, init_options={"prefetchTokensPerMin": budget, "maxTokens": 32}) as client:
            for i in range(12):
                uri = f"file:///w/b{i}.py"
                open_doc(client, uri, f"{head}value_{i} = \n")
                await asyncio.wait_for(
                    client.text_document_inline_completion_async(inline_params(uri, 1, 9 + len(str(i)))), 20
                )
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            st = await stats(client)
    prompt = tokens.count(f"{head}value_0 = x + 1") + tokens.count("\n")  # a prefetch's smallest prompt
    issued = st["prefetch"].get("issued", 0)
    assert 1 <= issued <= budget // prompt
    assert st["prefetch"]["skipped_budget"] >= 12 - issued - st["prefetch"].get("skipped_busy", 0) - 1
    assert len(completions(sim)) == 12 + issued


async def test_prefetch_off(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=1), responder=responder) as sim:
        env = env_for(tmp_path, sim, SIDECAR_PREFETCH="false")
        async with sidecar(env) as client:
            open_doc(client, URI, "import math\n\ndef area(r):\n    \n")
            await ask(client, 3, 4)
            await asyncio.sleep(0.3)
            st = await stats(client)
    assert len(completions(sim)) == 1 and not st["prefetch"]


async def test_accept_before_the_prefetch_has_text_keeps_it(tmp_path):
    # The user accepts while the "after shown" prefetch still waits for its first token:
    # the next-line speculation must not replace it, and the re-request joins it.
    async with SimulatedBackend(
        latency=LatencyModel(ttft_ms=300, tokens_per_s=400, seed=1), responder=responder
    ) as sim:
        async with sidecar(env_for(tmp_path, sim)) as client:
            open_doc(client, URI, "import math\n\ndef area(r):\n    \n")
            first = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params(URI, 3, 4, invoked=True)), 20
            )
            item = first.items[0]
            await sim.wait_until(lambda: len(completions(sim)) >= 2, timeout=5)
            assert completions(sim)[1].tokens_sent == 0  # the prefetch has no text yet
            insert(client, 2, 3, 4, item.insert_text)
            await accept(client, item)
            after_accept = await ask(client, 3, 4 + len(item.insert_text))
            st = await stats(client)
    assert after_accept is not None and after_accept.items[0].insert_text == "\n    return result"
    # The re-request joined the prefetch: the only user stream is the first one. (A later
    # upstream request may be the next speculation, made after this answer was shown.)
    assert st["counters"]["sched.streams_started"] == 1 and st["counters"]["sched.joined"] == 1
    assert completions(sim)[1].body["prompt"].endswith("* r * r") and completions(sim)[1].completed
    assert st["prefetch"].get("skipped_busy", 0) == 0 and "cancelled.replaced" not in st["prefetch"]


async def test_a_guessed_next_line_never_replaces_the_prefetch_at_the_line_end(tmp_path):
    """The model says a blank line follows the accepted line. Accepting it must not swap
    that prefetch for one at a guessed indentation (the editor asks at the line end
    first, right after the accept)."""

    def resp(body):
        p = body["prompt"]
        if p.endswith("* r * r"):
            return "\n\n    return result"
        return responder(body)

    async with SimulatedBackend(latency=LatencyModel(ttft_ms=40, tokens_per_s=200, seed=1), responder=resp) as sim:
        async with sidecar(env_for(tmp_path, sim)) as client:
            open_doc(client, URI, "import math\n\ndef area(r):\n    \n")
            item = (await ask(client, 3, 4)).items[0]
            await sim.wait_until(lambda: len(completions(sim)) >= 2 and completions(sim)[1].ended_at, timeout=5)
            insert(client, 2, 3, 4, item.insert_text)
            await accept(client, item)
            after_accept = await ask(client, 3, 4 + len(item.insert_text))
            await asyncio.sleep(0.2)
            st = await stats(client)
    assert after_accept.items[0].insert_text.strip() == "return result"  # from the prefetch
    prompts = [r.body["prompt"] for r in completions(sim)]
    assert not any(p.endswith("* r * r\n    ") for p in prompts), prompts
    assert st["prefetch"]["skipped_line_end"] >= 1
    assert st["prefetch"]["used"] == 1


async def test_a_prefetch_that_came_true_gives_its_tokens_back(tmp_path):
    """The budget caps waste. A budget that holds one prefetch and a half: after the
    first prefetch answers the request that follows the accept, the next speculation
    still fits (it would not if the used one stayed spent)."""
    doc = "import math\n\ndef area(r):\n    \n"
    max_tokens = 32
    first = tokens.count("import math\n\ndef area(r):\n    result = 3.14159 * r * r") + tokens.count("\n")
    second = tokens.count("import math\n\ndef area(r):\n    result = 3.14159 * r * r\n    return result")
    second += tokens.count("\n")
    spent = first + tokens.count("\n    return result")  # the first prefetch's prompt and text
    budget = max(first, second) + max_tokens + spent // 2
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=40, tokens_per_s=200, seed=1), responder=responder) as sim:
        env = env_for(tmp_path, sim)
        async with sidecar(env, init_options={"prefetchTokensPerMin": budget, "maxTokens": max_tokens}) as client:
            open_doc(client, URI, doc)
            item = (await ask(client, 3, 4)).items[0]
            await sim.wait_until(lambda: len(completions(sim)) >= 2 and completions(sim)[1].ended_at, timeout=5)
            insert(client, 2, 3, 4, item.insert_text)
            await accept(client, item)
            after_accept = await ask(client, 3, 4 + len(item.insert_text))
            await sim.wait_until(lambda: len(completions(sim)) >= 3, timeout=5)
            st = await stats(client)
    assert after_accept.items[0].insert_text == "\n    return result"
    assert completions(sim)[2].body["prompt"].endswith("return result")  # the next speculation
    assert st["prefetch"]["issued"] == 2 and st["prefetch"].get("skipped_budget", 0) == 0
    assert st["prefetch"]["tokens_refunded"] >= first
