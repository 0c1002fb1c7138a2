"""Nothing private travels (completion/crossfile/exclusion.py, observability/redact.py),
over real stdio with a real workspace on disk and a simulated cloud that records every
request it gets:

- credentials written in a source file that the open file imports (an access key, a
  secret key, a token, a password in a URL, a private-key block) never reach the backend,
  while that file's definition does (redacted) and completions go on;
- a file listed in ``.sidecarignore`` is never read by the index, never sent as a snippet
  even while it is open in the editor, and gets no completion: asked inside it, the
  server answers with nothing and sends nothing upstream;
- the ``ignore_paths`` setting does the same for its patterns;
- an invalid ``.sidecarignore`` line is logged once and skipped; the other lines apply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import client_capabilities, inline_params, open_doc, sidecar_env, wait_ready
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-content-exclusion-0123456789"
INIT = {"debounceMinMs": 0, "debounceMaxMs": 0, "prefetchEnabled": False}

# Planted credentials: none of these strings may reach the backend.
PLANTED = {
    "access key": "AKIAQX7EXAMPLE7Z3KQ2",
    "secret key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz91Ka2",
    "token": "ghp_9fK2mQ7xZ1vB8nR4tY6uI0oP3aS5dF7gH9jK",
    "url password": "Sup3rS3cretDbPass",
    "private key": "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
}

STORAGE_PY = f'''"""Storage client set-up."""


def make_storage_client(region="eu-west-1"):
    """A client for the object store, with the team's credentials."""
    access_key = "{PLANTED["access key"]}"
    secret_key = "{PLANTED["secret key"]}"
    api_token = "{PLANTED["token"]}"
    database = "postgres://app:{PLANTED["url password"]}@db.internal/app"
    signing_key = """-----BEGIN PRIVATE KEY-----
{PLANTED["private key"]}
q1w2e3r4t5y6u7i8o9p0asdfghjklzxcvbnm
-----END PRIVATE KEY-----"""
    return StorageClient(region, access_key, secret_key, api_token, database, signing_key)
'''

VAULT_MARK = "vault_internal_marker_7731"
VAULT_PY = f'''"""Kept private: listed in .sidecarignore."""


def unlock_private_vault(passphrase):
    """Open the vault."""
    {VAULT_MARK} = passphrase[::-1]
    return {VAULT_MARK}
'''

LEDGER_MARK = "ledger_internal_marker_4410"
LEDGER_PY = f"""def settle_private_ledger(entries):
    {LEDGER_MARK} = sorted(entries)
    return {LEDGER_MARK}
"""

MAIN_PY = """from .storage import make_storage_client
from .vault import unlock_private_vault
from .ledger import settle_private_ledger


def open_everything(region, passphrase, entries):
    client = make_storage_client(region)
    vault = unlock_private_vault(passphrase)
    ledger = settle_private_ledger(entries)
    return make_storage_client("""


def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


def end_of(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def workspace(root: Path) -> dict[str, Path]:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "storage.py").write_text(STORAGE_PY)
    (pkg / "vault.py").write_text(VAULT_PY)
    (pkg / "ledger.py").write_text(LEDGER_PY)
    (pkg / "main.py").write_text(MAIN_PY)
    # Line 2 is not a valid pattern (a trailing backslash): skipped, logged once.
    (root / ".sidecarignore").write_text("# private code\nbroken\\\npkg/vault.py\n")
    return {"main": pkg / "main.py", "vault": pkg / "vault.py", "storage": pkg / "storage.py"}


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, sim: SimulatedBackend | None, root: Path, init: dict[str, Any] | None = None, **env: str
) -> AsyncIterator[LanguageClient]:
    """The server over stdio with ``root`` as its workspace folder: the simulated cloud
    ``sim``, or the embedded local engine when ``sim`` is None."""
    cloud = {"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": sim.base_url} if sim is not None else {}
    server_env = sidecar_env(tmp_path / "home", SIDECAR_CACHE="false", **cloud, **env)
    config = ClientServerConfig(server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=server_env)
    client = await config.start()
    caps = client_capabilities()
    caps.workspace = types.WorkspaceClientCapabilities(workspace_folders=True)
    await client.initialize_session(
        types.InitializeParams(
            capabilities=caps,
            initialization_options={**INIT, **(init or {})},
            root_uri=uri_of(root),
            workspace_folders=[types.WorkspaceFolder(uri=uri_of(root), name=root.name)],
        )
    )
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=5)) as s:
        s.set_responder(lambda body: "region)")
        yield s


async def stats(client: LanguageClient) -> dict[str, Any]:
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


def bodies(sim: SimulatedBackend) -> list[str]:
    """Every request the backend received, as JSON text (what left the machine)."""
    return [json.dumps(r.body) for r in sim.requests if r.body]


async def ask(client: LanguageClient, uri: str, line: int, col: int) -> Any:
    return await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, line, col, invoked=True)), 30
    )


def log_text(tmp_path: Path) -> str:
    path = tmp_path / "home" / "state" / "sidecar" / "log" / "sidecar.jsonl"
    return path.read_text(errors="replace") if path.exists() else ""


async def test_credentials_and_excluded_files_never_reach_the_cloud(tmp_path, sim):
    root = tmp_path / "project"
    files = workspace(root)
    main_uri = uri_of(files["main"])
    async with server(tmp_path, sim, root, SIDECAR_IGNORE_PATHS='["ledger.py"]') as client:
        open_doc(client, main_uri, MAIN_PY)
        index, _waited = await wait_ready(client)
        first = await ask(client, main_uri, *end_of(MAIN_PY))
        # The excluded file opened in the editor: still no snippet of it elsewhere...
        vault_uri = uri_of(files["vault"])
        open_doc(client, vault_uri, VAULT_PY)
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=vault_uri, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(
                            start=types.Position(line=6, character=0), end=types.Position(line=6, character=0)
                        ),
                        text=f"    # {VAULT_MARK} edited\n",
                    )
                ],
            )
        )
        await asyncio.sleep(0.2)
        second = await ask(client, main_uri, 8, 43)
        # ... and no completion inside it: nothing goes upstream.
        sent_before = len(bodies(sim))
        inside = await ask(client, vault_uri, 5, 4)
        await asyncio.sleep(0.3)
        sent_after = len(bodies(sim))
        counters = (await stats(client))["counters"]
    sent = bodies(sim)
    # Completions elsewhere go on, and the imported definition reached the prompt.
    assert first is not None and first.items, "the request in main.py was answered"
    assert second is not None and second.items, "the second request in main.py was answered"
    assert any("def make_storage_client" in b and "StorageClient(region" in b for b in sent), sent[:1]
    for what, value in PLANTED.items():
        leaked = [b for b in sent if value in b]
        assert not leaked, f"the {what} reached the backend: {leaked[0][:2000]}"
    assert counters.get("privacy.redacted_snippets", 0) >= 1, counters
    for mark in (VAULT_MARK, "unlock_private_vault(passphrase):", LEDGER_MARK, "def settle_private_ledger"):
        leaked = [b for b in sent if mark in b]
        assert not leaked, f"{mark!r} of an excluded file reached the backend: {leaked[0][:2000]}"
    assert inside is None or not inside.items, inside
    assert sent_after == sent_before, sim.requests[sent_before:]
    assert counters.get("privacy.cloud_refused", 0) >= 1, counters
    assert index["skipped"].get("excluded") == 2, index  # vault.py (.sidecarignore), ledger.py (setting)
    # The invalid line: logged once, and the next line still applied.
    log = log_text(tmp_path)
    assert log.count("is not a valid pattern") == 1, log[-3000:]
    assert ".sidecarignore line 2" in log, log[-3000:]


@pytest.mark.timeout(240)
async def test_with_the_local_engine_an_excluded_file_still_gets_completions(tmp_path):
    """Nothing leaves the machine in local mode (the embedded engine, SmolLM2 on the CPU),
    so a file listed in ``.sidecarignore`` is completed as any other; it stays out of
    the index."""
    root = tmp_path / "project"
    files = workspace(root)
    text = (
        'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n    return '
    )
    async with server(tmp_path, None, root, {"requestTimeoutMs": 120000}) as client:
        vault_uri = uri_of(files["vault"])
        open_doc(client, vault_uri, text)  # the editor's text of the excluded file
        index, _waited = await wait_ready(client)
        answer = await asyncio.wait_for(
            client.text_document_inline_completion_async(inline_params(vault_uri, *end_of(text), invoked=True)), 180
        )
        counters = (await stats(client))["counters"]
    assert answer is not None and answer.items, "the local engine completed in the excluded file"
    assert "privacy.cloud_refused" not in counters, counters
    assert index["skipped"].get("excluded") == 1, index  # vault.py: never indexed, even locally
