"""Observability over real stdio: exact counts after a scripted session, structured logs
with trace IDs (and no key or document text), the opt-in Prometheus endpoint, the
`sidecar stats` CLI, and the one-time latency warning."""

from __future__ import annotations

import asyncio
import json
import socket
import sys

import httpx2 as httpx
import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)
KEY = "sk-observability-KEY-77aa"
MARKER = "zebra_marker_9431"  # document text that must never reach a log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def ask(client, uri, line, col, invoked=True):
    return await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, line, col, invoked)), 20
    )


def change(client, uri, version, line, col, text):
    pos = types.Position(line, col)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(pos, pos), text=text)],
        )
    )


async def test_scripted_session_gives_exact_counts(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda b: "total = price * count" if b["prompt"].endswith("    ") else "z")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
        uri = "file:///w/s.py"
        async with sidecar(env) as client:
            open_doc(client, uri, "def f(price, count):\n    \n")
            a1 = await ask(client, uri, 1, 4)  # 1: a new stream
            await asyncio.sleep(0.2)
            a2 = await ask(client, uri, 1, 4)  # 2: the finished stream, shown again
            change(client, uri, 2, 1, 4, "to")
            a3 = await ask(client, uri, 1, 6)  # 3: typing through it
            change(client, uri, 3, 1, 6, "#")
            a4 = await ask(client, uri, 1, 7)  # 4: diverged: a second stream
            a5 = await ask(client, uri, 40, 0)  # 5: invalid position
            st = await stats(client)
    c = st["counters"]
    assert [a.items[0].insert_text if a else None for a in (a1, a2, a3, a4, a5)] == [
        "total = price * count",
        "total = price * count",
        "tal = price * count",
        "z",
        None,
    ]
    assert c["sched.requests"] == 4 and c["invalid_position"] == 1
    assert c["sched.streams_started"] == 2 and c["upstream.requests"] == 2
    assert c["sched.reshown"] == 1 and c["sched.typed_through"] == 1
    assert c["answers.stream"] == 2 and c["answers.reshown"] == 1 and c["answers.typed_through"] == 1
    assert c["suggestions.shown"] == 4
    assert st["latency_ms"]["time_to_suggestion"]["count"] == 4
    assert st["latency_ms"]["upstream_ttft"]["count"] == 2
    assert len([r for r in sim.requests if r.path.endswith("completions")]) == 2


async def test_logs_have_trace_ids_and_no_key_or_document_text(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda b: "result = 1")
        for level in ("warning", "info"):
            env = sidecar_env(
                tmp_path / level, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_LOG_LEVEL=level
            )
            async with sidecar(env) as client:
                open_doc(client, "file:///w/l.py", f"{MARKER} = 1\ndef f():\n    \n")
                await ask(client, "file:///w/l.py", 2, 4)
                sim.inject(Fault.siliconflow("rate_limit_tpm"))
                open_doc(client, "file:///w/m.py", f"{MARKER}_2 = 2\n")
                await ask(client, "file:///w/m.py", 0, 0)
                await asyncio.sleep(0.2)
    for level in ("warning", "info"):
        path = tmp_path / level / "state" / "sidecar" / "log" / "sidecar.jsonl"
        text = path.read_text()
        records = [json.loads(line) for line in text.splitlines()]
        assert records, f"no log records at {level}"
        assert KEY not in text and MARKER not in text
        assert any(r["level"] == "warning" and "TPM" in r["msg"] and r["trace_id"] for r in records)
    info = [
        json.loads(line)
        for line in (tmp_path / "info" / "state" / "sidecar" / "log" / "sidecar.jsonl").read_text().splitlines()
    ]
    ended = [r for r in info if r["msg"] == "upstream stream ended"]
    sim_ids = {r.trace_id for r in sim.requests if r.path.endswith("completions")}
    assert ended and all(r["trace_id"] for r in ended)
    assert {r["upstream_trace_id"] for r in ended} <= sim_ids


async def test_prometheus_endpoint_serves_the_same_counts_only_when_enabled(tmp_path):
    port = free_port()
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda b: "value")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
        async with sidecar(env, init_options={"prometheusPort": port}) as client:
            open_doc(client, "file:///w/p.py", "x = \n")
            await ask(client, "file:///w/p.py", 0, 4)
            st = await stats(client)
            async with httpx.AsyncClient(trust_env=False) as http:
                body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
        lines = dict(line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
        assert float(lines["sidecar_upstream_requests_total"]) == st["counters"]["upstream.requests"] == 1
        assert float(lines["sidecar_sched_requests_total"]) == st["counters"]["sched.requests"]
        assert 'sidecar_time_to_suggestion_ms_quantile{quantile="0.5"}' in lines
        async with sidecar(sidecar_env(tmp_path / "off", SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)):
            async with httpx.AsyncClient(trust_env=False) as http:
                with pytest.raises(httpx.ConnectError):
                    await http.get(f"http://127.0.0.1:{port}/metrics")


async def test_stats_cli_reads_a_running_sidecar(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda b: "value")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
        async with sidecar(env) as client:
            open_doc(client, "file:///w/c.py", "x = \n")
            await ask(client, "file:///w/c.py", 0, 4)
            await asyncio.sleep(2.5)  # the stats file is refreshed every 2 s
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "sidecar",
                "stats",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    running = json.loads(out)
    assert len(running) == 1
    (only,) = running.values()
    assert only["counters"]["upstream.requests"] == 1 and KEY not in out.decode()


async def test_slow_backend_warns_once(tmp_path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=250, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda b: "v")
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
        async with sidecar(env, init_options={"latencyWarnMs": 100}) as client:
            for i in range(8):
                open_doc(client, f"file:///w/w{i}.py", f"x{i} = \n")
                await ask(client, f"file:///w/w{i}.py", 0, 4 + len(str(i)))
            messages = [m.message for m in client.messages]
            st = await stats(client)
    slow = [m for m in messages if "completions are slow" in m]
    assert len(slow) == 1 and "doctor" in slow[0]
    assert st["counters"]["latency_warnings"] == 1
    assert any(s.get("health") == "slow" for s in client.sidecar_status)


async def test_log_records_go_to_the_client_at_their_level(tmp_path):
    """SIDECAR_LOG_TO_CLIENT=1 (the VS Code extension sets it): sidecar's log records arrive
    as window/logMessage with the type of their level, and stderr stays quiet."""
    import asyncio as _asyncio

    from lsprotocol import types as _types

    from conftest import open_doc, sidecar, sidecar_env
    from devtools.simulator import Fault, LatencyModel, SimulatedBackend

    async with SimulatedBackend(LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as sim:
        sim.inject(Fault.siliconflow("overloaded"))  # one upstream error: a WARNING record
        env = sidecar_env(tmp_path, SIDECAR_BASE_URL=sim.base_url, SIDECAR_LOG_TO_CLIENT="1", SIDECAR_LOG_LEVEL="info")
        async with sidecar(env) as client:
            open_doc(client, "file:///w/l.py", "x = \n")
            await _asyncio.wait_for(
                client.text_document_inline_completion_async(
                    _types.InlineCompletionParams(
                        text_document=_types.TextDocumentIdentifier(uri="file:///w/l.py"),
                        position=_types.Position(line=0, character=4),
                        context=_types.InlineCompletionContext(trigger_kind=_types.InlineCompletionTriggerKind.Invoked),
                    )
                ),
                20,
            )
            await _asyncio.sleep(0.5)
            logged = [(m.type, m.message) for m in client.log_messages]
    infos = [msg for kind, msg in logged if kind == _types.MessageType.Info]
    warnings = [msg for kind, msg in logged if kind == _types.MessageType.Warning]
    assert any("backend:" in m for m in infos), logged
    assert any("upstream error (overloaded)" in m for m in warnings), logged
