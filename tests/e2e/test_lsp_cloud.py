"""The sidecar over real stdio, against the simulated SiliconFlow backend on loopback."""

from __future__ import annotations

import asyncio
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-not-a-real-key-1234567890"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as s:
        yield s


def cloud_env(tmp_path, sim, **extra):
    return sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, **extra)


def completions(sim):
    return [r for r in sim.requests if r.path.endswith(("/completions",))]


async def wait_done(client, timeout=10):
    deadline = time.monotonic() + timeout
    while not (client.sidecar_updates and client.sidecar_updates[-1][1]["done"]):
        assert time.monotonic() < deadline, "no final update notification"
        await asyncio.sleep(0.02)


async def ask(client, uri, line, character, timeout=20):
    return await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, line, character)), timeout
    )


async def complete_once(tmp_path, sim, uri, text, line, character, **env):
    """One session: open ``text`` as ``uri``, ask for a completion at (line, character) and
    return the answer; ``env`` goes to ``cloud_env``."""
    async with sidecar(cloud_env(tmp_path, sim, **env)) as client:
        open_doc(client, uri, text)
        return await ask(client, uri, line, character)


async def test_fim_request_has_siliconflow_shape(tmp_path, sim):
    sim.script(["return a + b"])
    text = "def add(a, b):\n    \n\nprint(add(1, 2))\n"
    result = await complete_once(tmp_path, sim, "file:///w/add.py", text, 1, 4)
    assert result is not None
    item = result.items[0]
    assert item.insert_text == "return a + b"
    assert item.range == types.Range(start=types.Position(1, 4), end=types.Position(1, 4))
    assert item.command is not None and item.command.command == "sidecar.acceptCompletion"
    (req,) = completions(sim)
    assert req.path == "/v1/completions"
    body = req.body
    assert body["prompt"] == "def add(a, b):\n    "
    assert body["suffix"] == "\n\nprint(add(1, 2))\n"
    assert body["model"] == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert isinstance(body["max_tokens"], int) and body["max_tokens"] > 0
    assert 1 <= len(body["stop"]) <= 4
    assert body["stream"] is True
    assert req.auth_present and req.auth_scheme == "Bearer"


async def test_prewarm_opens_connection_before_first_keystroke(tmp_path, sim):
    async with sidecar(cloud_env(tmp_path, sim)):
        await sim.wait_for_requests(1, timeout=5)
        assert sim.requests[0].path == "/v1/models"


async def test_utf16_columns_after_non_ascii(tmp_path, sim):
    sim.script(["len(s)"])
    line = 's = "héllo wörld 😀"; n = '
    utf16_col = len(line.encode("utf-16-le")) // 2  # the emoji counts 2 units
    assert utf16_col == len(line) + 1
    text = line + "\nprint(n)\n"
    result = await complete_once(tmp_path, sim, "file:///w/u.py", text, 0, utf16_col)
    item = result.items[0]
    assert item.insert_text == "len(s)"
    assert item.range.start == types.Position(0, utf16_col) == item.range.end
    assert completions(sim)[0].body["prompt"] == line


async def test_crlf_document(tmp_path, sim):
    sim.script(["total = 0\n    for x in xs:\n        total += x"])
    # Slow enough that the stream is still running when the first line is finished, on a
    # loaded machine too (at 500 tokens/s it could be over before the request is answered).
    sim.set_latency(LatencyModel(ttft_ms=10, tokens_per_s=25, seed=1))
    text = "def total(xs):\r\n    \r\n    return total\r\n"
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/crlf.py", text)
        first = await ask(client, "file:///w/crlf.py", 1, 4)
        await wait_done(client)
        again = await ask(client, "file:///w/crlf.py", 1, 4)  # answered by the finished stream
    body = completions(sim)[0].body
    assert body["prompt"] == "def total(xs):\n    "
    assert "\r" not in body["suffix"]
    assert first.items[0].insert_text == "total = 0"  # answered as soon as the first line was complete
    assert again.items[0].insert_text == "total = 0\r\n    for x in xs:\r\n        total += x"
    assert len(completions(sim)) == 1
    final = client.sidecar_updates[-1][1]
    assert final["done"] and final["items"][0]["insertText"] == again.items[0].insert_text


@pytest.mark.parametrize(
    "kind, expected",
    [
        ("bad_key", "rejected the API key"),
        ("model_not_found", "does not serve the model"),
        ("rate_limit_rpm", "RPM limit"),
        ("rate_limit_tpm", "TPM limit"),
        ("overloaded", "overloaded"),
        ("unknown", "failed with HTTP 500"),
    ],
)
async def test_siliconflow_errors_one_message_null_answer(tmp_path, sim, kind, expected):
    sim.inject(Fault.siliconflow(kind), persistent=True)
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/e.py", "x = \n")
        for _ in range(3):
            assert await ask(client, "file:///w/e.py", 0, 4) is None
        await asyncio.sleep(0.2)
        shown = [m for m in client.messages if m.message.startswith("sidecar:")]
    assert len(shown) == 1, [m.message for m in shown]
    assert expected in shown[0].message
    assert KEY not in shown[0].message


async def test_cancel_request_answers_32800_and_closes_upstream(tmp_path, sim):
    sim.set_latency(LatencyModel(ttft_ms=50, tokens_per_s=20, seed=1))
    sim.script(["x" * 4 + " = compute(" + ", ".join(f"arg{i}" for i in range(60)) + ")"])
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/c.py", "def f():\n    \n")
        fut = asyncio.ensure_future(
            client.protocol.send_request_async(
                types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params("file:///w/c.py", 1, 4), msg_id="cancel-me"
            )
        )
        await sim.wait_until(lambda: any(r.tokens_sent >= 2 for r in completions(sim)), timeout=5)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="cancel-me"))
        t_cancel = time.monotonic()
        with pytest.raises(JsonRpcRequestCancelled) as err:
            await asyncio.wait_for(fut, 5)
        assert err.value.code == -32800
        rec = await sim.wait_for_disconnect(completions(sim)[0].index, timeout=5)
    assert rec.disconnected and not rec.completed
    assert rec.tokens_sent < rec.tokens_total
    # Closed within 50 ms of the cancel: 25 ms of grace for a joining request, plus the close.
    assert (rec.disconnected_at - t_cancel) * 1000 < 50


async def test_native_fim_refused_falls_back_to_template(tmp_path, sim):
    sim.inject(Fault.status(400, {"code": 20015, "message": "The parameter is invalid: suffix", "data": None}))
    sim.script(["pass"])
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/f.py", "def f():\n    \n")
        result = await ask(client, "file:///w/f.py", 1, 4)
        sim.script(["pass"])
        open_doc(client, "file:///w/f2.py", "def g():\n    \n")
        await ask(client, "file:///w/f2.py", 1, 4)
    reqs = completions(sim)
    assert "suffix" in reqs[0].body
    assert "suffix" not in reqs[1].body and reqs[1].body["prompt"].startswith("<|fim_prefix|>")
    assert reqs[1].body["prompt"].endswith("<|fim_middle|>")
    assert "suffix" not in reqs[2].body  # remembered
    assert result.items[0].insert_text == "pass"
    assert not client.messages


async def test_model_without_fim_uses_chat(tmp_path, sim):
    sim.script(["return 42"])
    result = await complete_once(
        tmp_path, sim, "file:///w/g.py", "def answer():\n    \n", 1, 4, SIDECAR_MODEL="Qwen/Qwen3-8B"
    )
    (req,) = completions(sim)
    assert req.path == "/v1/chat/completions"
    assert req.body["model"] == "Qwen/Qwen3-8B"
    assert "<CURSOR>" in req.body["messages"][-1]["content"]
    assert result.items[0].insert_text == "return 42"


async def test_malformed_event_is_skipped(tmp_path, sim):
    sim.inject(Fault.malformed(after_tokens=2))
    sim.script(["value = compute(1, 2)"])
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/m.py", "def f():\n    \n")
        result = await ask(client, "file:///w/m.py", 1, 4)
        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert result.items[0].insert_text == "value = compute(1, 2)"
    assert stats["counters"]["upstream.malformed_events"] == 1


async def test_stream_cut_keeps_what_arrived(tmp_path, sim):
    sim.inject(Fault.cut(after_tokens=3))
    sim.script(["alpha beta gamma delta epsilon"])
    result = await complete_once(tmp_path, sim, "file:///w/k.py", "words = \n", 0, 8)
    sent = completions(sim)[0].text_sent
    assert result is not None and result.items[0].insert_text == sent.rstrip()
    assert 0 < len(sent) < len("alpha beta gamma delta epsilon")


async def test_stall_hits_deadline_and_answers(tmp_path, sim):
    sim.inject(Fault.stall(after_tokens=2))
    sim.script(["first second third fourth"])
    async with sidecar(cloud_env(tmp_path, sim), init_options={"requestTimeoutMs": 600}) as client:
        open_doc(client, "file:///w/s.py", "words = \n")
        t0 = time.monotonic()
        result = await ask(client, "file:///w/s.py", 0, 8)
        elapsed = time.monotonic() - t0
        rec = await sim.wait_for_disconnect(completions(sim)[0].index, timeout=5)
    assert elapsed < 5
    assert result is not None and result.items[0].insert_text == rec.text_sent.rstrip()
    assert rec.disconnected


async def test_suffix_repeat_is_cut_and_stream_closed(tmp_path, sim):
    # The model re-writes the line that already follows the cursor, then keeps going.
    sim.script(["y = x * 2\n    return y\n    # trailing chatter that should never be streamed in full"])
    text = "def double(x):\n    \n    return y\n"
    result = await complete_once(tmp_path, sim, "file:///w/r.py", text, 1, 4)
    assert result.items[0].insert_text == "y = x * 2"


async def test_every_request_answered_including_bad_input(tmp_path, sim):
    sim.set_responder(lambda body: "ok()")
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        open_doc(client, "file:///w/a.py", "a = 1\nb = \n")
        open_doc(client, "file:///w/bin.py", "\x00\x01\x02binary\x00" * 100)
        params = [
            inline_params("file:///w/a.py", 1, 4),
            inline_params("file:///w/a.py", 99, 0),  # line past the end
            inline_params("file:///w/a.py", 0, 500),  # column past the end: the line end
            inline_params("file:///w/missing.py", 0, 0),  # never opened
            inline_params("file:///w/bin.py", 0, 3),  # binary content
        ] * 4
        results = await asyncio.wait_for(
            asyncio.gather(*(client.text_document_inline_completion_async(p) for p in params)), 30
        )
        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert len(results) == 20
    assert all(r is None for i, r in enumerate(results) if i % 5 not in (0, 2))
    assert stats["counters"]["invalid_position"] == 4
    assert stats["counters"]["not_completable"] == 4
