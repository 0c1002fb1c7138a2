"""A model file that starts with the GGUF magic but holds random bytes (issue scenario D),
over real stdio in local mode: refused before the engine starts, with one
``window/showMessage`` of type Error naming the file, the cause and the fix; every
request answered at once with nothing; no restart loop."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env

pytestmark = pytest.mark.timeout(90)


async def test_a_gguf_of_random_bytes_is_refused_once_and_every_request_is_answered_at_once(tmp_path):
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"GGUF" + os.urandom(1 << 20))
    env = sidecar_env(tmp_path, SIDECAR_MODE="local", SIDECAR_LOCAL_MODEL_PATH=str(model))
    uri = "file:///w/broken.py"
    times = []
    async with sidecar(env) as client:
        open_doc(client, uri, "def f(x):\n    return ")
        for _ in range(3):
            t0 = time.monotonic()
            result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 1, 11)), 30)
            times.append(time.monotonic() - t0)
            assert result is None or not result.items
            await asyncio.sleep(1.0)
        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert len(errors) == 1, errors
    assert str(model) in errors[0] and "GGUF" in errors[0] and "Traceback" not in errors[0]
    assert "local_model_path" in errors[0]  # the fix
    assert max(times[1:]) < 1.0, times  # known broken: answered at once
    assert stats["status"]["enginePid"] is None  # llama.cpp never got the file
