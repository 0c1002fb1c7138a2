"""Bounded memory: pygls's per-notification futures are dropped, and the soak benchmark
runs end to end (a small slice; the 10,000-request figure is in the README)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from lsprotocol import types

from conftest import ROOT, open_doc, sidecar, sidecar_env

pytestmark = pytest.mark.timeout(120)


async def test_notifications_leave_no_handler_futures_behind(tmp_path):
    # A base URL that nothing serves: no engine starts, and no completion is asked for.
    env = sidecar_env(tmp_path, SIDECAR_BASE_URL="http://127.0.0.1:9/v1")
    uri = "file:///w/n.py"
    async with sidecar(env) as client:
        open_doc(client, uri, "x = 1\n")
        for i in range(600):
            client.text_document_did_change(
                types.DidChangeTextDocumentParams(
                    text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2 + i),
                    content_changes=[
                        types.TextDocumentContentChangePartial(
                            range=types.Range(start=types.Position(0, 5), end=types.Position(0, 5)), text="1"
                        )
                    ],
                )
            )
        await asyncio.sleep(0.5)
        st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    # pygls 2.1.1 alone keeps one future per didChange (600 here).
    assert st["runtime"]["request_futures"] <= 5, st["runtime"]


def test_soak_benchmark_smoke(tmp_path):
    out = tmp_path / "soak.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_soak.py"),
            "--requests",
            "400",
            "--warmup",
            "100",
            "--sample-every",
            "100",
            "--docs",
            "6",
            "--max-growth-mb",
            "1000",
            "--json-out",
            str(out),
            "--state-dir",
            str(tmp_path / "state"),
        ],
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out.read_text())
    assert data["requests"] == 400 and data["unanswered"] == 0 and data["errors"] == 0
    assert data["answered"] + data["cancelled_answered_32800"] == 400
    assert data["rss_mb"]["start"] > 0 and "growth after warm-up" in proc.stdout
