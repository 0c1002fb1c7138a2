"""``sidecar.setMode`` / ``sidecar.toggleLocalGpu`` at their edges, over real stdio with
the simulator on loopback as the cloud:

- a mode the settings cannot serve (``local_engine = "ollama"`` without ``local_url``)
  is refused with the reason, one warning and no traceback; the previous mode stays and
  serves;
- the mode already in use changes nothing: no new backend, the in-flight stream is
  untouched and ``/v1/models`` is not probed again;
- a huge argument is not echoed whole in the -32602 answer or the log.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)
KEY = "sk-set-mode-not-a-real-key-0123"
REASON = "local_engine 'ollama' needs local_url (SIDECAR_LOCAL_URL)"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1), api_key=KEY) as s:
        s.set_responder(lambda body: "done()")
        yield s


def cloud_env(tmp_path, sim, **extra):
    return sidecar_env(
        tmp_path,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_API_KEY=KEY,
        SIDECAR_LOG_FILE=str(tmp_path / "sidecar.jsonl"),
        **extra,
    )


def log_records(tmp_path):
    path = tmp_path / "sidecar.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def cmd(client, name, *args):
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args))), 20
    )


async def test_a_mode_the_settings_cannot_serve_is_refused_with_the_reason(tmp_path, sim, capfd):
    (tmp_path / "config.toml").write_text('local_engine = "ollama"\n')
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        outs = [
            await cmd(client, "sidecar.setMode", "local"),
            await cmd(client, "sidecar.setMode", "auto"),
            await cmd(client, "sidecar.toggleLocalGpu"),
        ]
        open_doc(client, "file:///w/c.py", "x = \n")
        answer = await asyncio.wait_for(
            client.text_document_inline_completion_async(inline_params("file:///w/c.py", 0, 4)), 20
        )
        stats = await cmd(client, "sidecar.stats")
        messages = [m.message for m in client.messages]
    for out in outs:
        assert out["changed"] is False and out["mode"] == "cloud", out
        assert REASON in out["message"] and "staying in cloud mode" in out["message"], out
    # Still serving from the cloud, with the key.
    assert answer is not None and answer.items[0].insert_text == "done()"
    assert stats["status"]["side"] == "cloud" and stats["status"]["mode"] == "cloud", stats["status"]
    assert [r for r in sim.requests if r.path.endswith("/completions") and r.auth_present]
    # One warning per refusal (shown and logged), never an error or a traceback.
    assert len([m for m in messages if REASON in m]) == 3, messages
    err = capfd.readouterr().err
    assert "Traceback" not in err and " ERROR " not in err, err
    records = log_records(tmp_path)
    assert not [r for r in records if r["level"] in ("error", "critical") or "exc" in r], records
    warned = [r for r in records if r["level"] == "warning"]
    assert len(warned) == 3 and all(REASON in r["msg"] for r in warned), warned


async def test_the_mode_in_use_changes_nothing_and_keeps_the_stream(tmp_path):
    slow = LatencyModel(ttft_ms=100, tokens_per_s=8, seed=1)
    async with SimulatedBackend(latency=slow, api_key=KEY) as sim:
        sim.set_responder(lambda body: "width * height  # the area of the rectangle, in square units")
        env = cloud_env(tmp_path, sim, SIDECAR_MAX_TOKENS="40")
        async with sidecar(env, init_options={"debounceMinMs": 0, "debounceMaxMs": 0}) as client:
            open_doc(client, "file:///w/c.py", "def area(width, height):\n    return \n")
            for _ in range(50):  # the start-up probe of /v1/models first
                if [r for r in sim.requests if r.path.endswith("/models")]:
                    break
                await asyncio.sleep(0.05)
            probes = len([r for r in sim.requests if r.path.endswith("/models")])
            asking = asyncio.ensure_future(
                client.text_document_inline_completion_async(inline_params("file:///w/c.py", 1, 11))
            )
            for _ in range(100):  # the stream is under way
                streams = [r for r in sim.requests if r.path.endswith("/completions")]
                if streams and streams[0].tokens_sent >= 2:
                    break
                await asyncio.sleep(0.05)
            assert streams and streams[0].ended_at is None, "the stream should still be running"
            out = await cmd(client, "sidecar.setMode", "cloud")
            await asyncio.wait_for(asyncio.shield(asking), 20)
            deadline = time.monotonic() + 20
            while streams[0].ended_at is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.3)
            again = await cmd(client, "sidecar.setMode", "cloud")
            statuses = [s.get("health") for s in client.sidecar_status]
    assert out["changed"] is False and out["mode"] == "cloud" and out.get("health") != "starting", out
    assert again["changed"] is False, again
    stream = streams[0]
    assert not stream.disconnected and stream.completed, (stream.tokens_sent, stream.tokens_total)
    assert len([r for r in sim.requests if r.path.endswith("/models")]) == probes  # not probed again
    assert len([r for r in sim.requests if r.path.endswith("/completions")]) == 1
    assert "starting" not in statuses[1:], statuses


async def test_a_huge_set_mode_argument_is_not_echoed_whole(tmp_path, sim, capfd):
    huge = "x" * 100_000
    async with sidecar(cloud_env(tmp_path, sim)) as client:
        with pytest.raises(JsonRpcException) as info:
            await cmd(client, "sidecar.setMode", huge)
        with pytest.raises(JsonRpcException) as long_method:  # an unknown command's name is echoed too
            await cmd(client, "y" * 100_000)
        stats = await cmd(client, "sidecar.stats")
    assert info.value.code == -32602
    assert "sidecar.setMode takes 'cloud', 'local' or 'auto'" in info.value.message
    assert len(info.value.message) < 200 and "…" in info.value.message, len(info.value.message)
    assert len(long_method.value.message) < 400, len(long_method.value.message)
    assert stats["status"]["side"] == "cloud"
    err = capfd.readouterr().err
    assert "x" * 200 not in err and "y" * 400 not in err
    warned = [r for r in log_records(tmp_path) if r["level"] == "warning"]
    assert warned and all(len(r["msg"]) < 400 for r in warned), [len(r["msg"]) for r in warned]
