"""Shared test helpers: a real sidecar process driven by pytest-lsp's client over stdio."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parents[1]


def sidecar_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """The test process's environment with the sidecar's variables cleared and a private
    config/cache location, plus ``env``."""
    # Keep the GPU knobs so scripts/gpu_local_check.sh can run the local tests offloaded.
    keep = {"SIDECAR_LOCAL_N_GPU_LAYERS", "SIDECAR_LOCAL_MODEL_PATH"}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in keep}
    base.update(
        SIDECAR_CONFIG=str(tmp_path / "config.toml"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        SIDECAR_LOG_LEVEL="info",
        # Speculative prefetch adds upstream requests of its own; tests that count upstream
        # requests for other features run without it, and tests/test_prefetch.py turns it on.
        SIDECAR_PREFETCH="false",
    )
    base.update(env)
    return base


def client_capabilities() -> types.ClientCapabilities:
    return types.ClientCapabilities(
        general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
        text_document=types.TextDocumentClientCapabilities(
            inline_completion=types.InlineCompletionClientCapabilities(dynamic_registration=False),
            synchronization=types.TextDocumentSyncClientCapabilities(),
        ),
        window=types.WindowClientCapabilities(show_message=types.ShowMessageRequestClientCapabilities()),
    )


def plain(obj: Any) -> Any:
    """pygls hands params of custom notifications over as namedtuples; make them dicts."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    return obj


def make_client() -> LanguageClient:
    """pytest-lsp's test client, also recording the sidecar's own notifications in
    ``client.sidecar_updates`` and ``client.sidecar_status`` (with arrival times)."""
    client = make_test_lsp_client()
    client.sidecar_updates = []  # type: ignore[attr-defined]
    client.sidecar_status = []  # type: ignore[attr-defined]

    @client.feature("sidecar/inlineCompletionUpdate")
    def _update(params: Any) -> None:
        client.sidecar_updates.append((time.monotonic(), plain(params)))  # type: ignore[attr-defined]

    @client.feature("sidecar/status")
    def _status(params: Any) -> None:
        client.sidecar_status.append(plain(params))  # type: ignore[attr-defined]

    return client


@contextlib.asynccontextmanager
async def sidecar(env: dict[str, str], init_options: dict[str, Any] | None = None) -> AsyncIterator[LanguageClient]:
    """Start ``python -m sidecar serve`` as a child process and initialize it."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=env, client_factory=make_client
    )
    client = await config.start()
    await client.initialize_session(
        types.InitializeParams(capabilities=client_capabilities(), initialization_options=init_options)
    )
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


def open_doc(client: LanguageClient, uri: str, text: str, language: str = "python") -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )


def inline_params(uri: str, line: int, character: int, invoked: bool = False) -> types.InlineCompletionParams:
    kind = types.InlineCompletionTriggerKind.Invoked if invoked else types.InlineCompletionTriggerKind.Automatic
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


@pytest.fixture
def anyio_backend():
    return "asyncio"
