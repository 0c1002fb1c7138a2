"""Secrets never leave: a real session whose backend echoes the request headers in its
error body. The redactor, the logging handlers and upstream errors are
tests/unit/test_redaction.py."""

from __future__ import annotations

import asyncio
import secrets
import sys
import time

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from conftest import client_capabilities, inline_params, make_client, open_doc, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------ end to end over stdio
# The server runs with fd 2 pointed at a file and a tee on its stdout, so everything it
# writes to either is checked byte for byte.
WRAPPER = r"""
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
os.dup2(fd, 2)
copy = open(sys.argv[2], "wb")
real = sys.stdout.buffer
class Tee:
    def write(self, data):
        copy.write(data); copy.flush()
        return real.write(data)
    def flush(self):
        real.flush()
    def close(self):
        copy.close(); real.close()
class Out:
    buffer = Tee()
sys.stdout = Out()
from sidecar.cli import main
sys.exit(main(["serve"]))
"""


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=7)) as s:
        yield s


def _echo_bodies(key: str) -> dict[str, object]:
    headers = (
        f"POST /v1/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json"
    )
    return {
        "json": {"code": 50500, "message": f"gateway error; request was: {headers}; api_key={key}", "data": None},
        "text": f"502 from gateway\n{headers}\n\nauth used: {key}",
    }


@pytest.mark.parametrize("shape, status", [("json", 500), ("text", 502)])
async def test_key_echoed_by_the_gateway_never_leaves(tmp_path, sim, shape, status):
    canary = f"sk-canary-{secrets.token_hex(16)}"
    sim.inject(Fault.status(status, _echo_bodies(canary)[shape]), persistent=True)
    log_file, err_file, out_file = tmp_path / "sidecar.jsonl", tmp_path / "stderr.txt", tmp_path / "stdout.bin"
    env = sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY=canary,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_LOG_FILE=str(log_file),
        SIDECAR_LOG_LEVEL="debug",
    )
    cfg = ClientServerConfig(
        server_command=[sys.executable, "-c", WRAPPER, str(err_file), str(out_file)],
        server_env=env,
        client_factory=make_client,
    )
    client = await cfg.start()
    try:
        await client.initialize_session(types.InitializeParams(capabilities=client_capabilities()))
        open_doc(client, "file:///w/leak.py", "def f():\n    \n")
        for _ in range(2):
            got = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params("file:///w/leak.py", 1, 4)), 20
            )
            assert got is None
        deadline = time.monotonic() + 5
        while not [m for m in client.messages if "HTTP" in m.message]:
            assert time.monotonic() < deadline, "the upstream error was never shown"
            await asyncio.sleep(0.05)
        await asyncio.wait_for(client.shutdown_session(), 15)
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()
        await client.stop()
    assert any(r.auth_present for r in sim.requests)  # the key was really sent

    shown = [m.message for m in client.messages] + [m.message for m in client.log_messages]
    assert any(f"HTTP {status}" in m for m in shown)
    assert any("***" in m for m in shown)  # the echoed header reached the user, redacted
    prefix = canary[:16]  # "sk-canary-" and six hex digits: no part of the key either
    for text in shown:
        assert canary not in text and prefix not in text, text
    outputs = {
        "log file": log_file.read_text(encoding="utf-8", errors="replace"),
        "stderr": err_file.read_text(encoding="utf-8", errors="replace"),
        "stdout": out_file.read_bytes().decode("utf-8", "replace"),
    }
    assert "HTTP" in outputs["log file"] and "HTTP" in outputs["stderr"]  # the error was logged
    assert "Content-Length" in outputs["stdout"]
    for where, text in outputs.items():
        assert canary not in text and prefix not in text, f"the key leaked to the {where}"
        assert canary[10:] not in text, f"the key's random part leaked to the {where}"
