"""Shared test helpers: a real sidecar process driven by pytest-lsp's client over stdio."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client

ROOT = Path(__file__).resolve().parents[2]


def sidecar_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """The test process's environment with the sidecar's variables cleared and a private
    config/cache location, plus ``env``.

    A ``SILICONFLOW_API_KEY`` in ``env`` means "SiliconFlow, played by the simulator on
    loopback": such an environment gets ``SIDECAR_PROVIDER=siliconflow`` (a loopback base
    URL alone is not SiliconFlow, see ``Settings.cloud_provider``) unless ``env`` sets
    ``SIDECAR_PROVIDER`` itself (``"auto"`` to test detection)."""
    # Keep the GPU knobs so scripts/gpu_local_check.sh can run the local tests offloaded.
    keep = {"SIDECAR_LOCAL_N_GPU_LAYERS", "SIDECAR_LOCAL_MODEL_PATH"}
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in keep}
    base.update(
        SIDECAR_CONFIG=str(tmp_path / "config.toml"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        SIDECAR_LOG_LEVEL="info",
        # Speculative prefetch adds upstream requests of its own; tests that count upstream
        # requests for other features run without it, and tests/e2e/test_prefetch.py turns it on.
        SIDECAR_PREFETCH="false",
        # The managed engine's model is pinned to the shipped SmolLM2 (fast, no download):
        # local_model "auto" would pick an installed code model. Tests of the code model
        # pass SIDECAR_LOCAL_MODEL themselves.
        SIDECAR_LOCAL_MODEL="smollm2-135m",
    )
    if "SILICONFLOW_API_KEY" in env:
        base["SIDECAR_PROVIDER"] = "siliconflow"
    base.update(env)
    return base


async def run_module(env: dict[str, str], module: str, *args: str, timeout: float = 60) -> tuple[int, str, str]:
    """``python -m MODULE ARGS`` as a real process from the repository root, without
    blocking the event loop (a simulator may run on it); returns (exit status, stdout,
    stderr). Kills the process and raises TimeoutError after ``timeout`` seconds."""
    import asyncio

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        module,
        *args,
        env=env,
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()


def kill_group(proc: Any) -> None:
    """SIGTERM the process group of ``proc`` (started with ``start_new_session``), then
    SIGKILL after 5 s; never raises for a group that is already gone."""
    import signal
    import subprocess

    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(5)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(5)


@contextlib.contextmanager
def simulator_process(tmp_path: Path, output: str, *, ttft_ms: float, tokens_per_s: float):
    """``python -m devtools.simulator`` in its own process (as a real backend would be, off
    the test's event loop) answering ``output``; yields its base URL (``.../v1``).
    Its log is ``tmp_path/simulator.log``."""
    import subprocess

    url_file = tmp_path / "sim-url"
    log = open(tmp_path / "simulator.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devtools.simulator",
            "--port",
            "0",
            "--url-file",
            str(url_file),
            "--ttft-ms",
            str(ttft_ms),
            "--tokens-per-s",
            str(tokens_per_s),
            "--output",
            output,
            "--log-level",
            "WARNING",
        ],
        stdout=log,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        cwd=str(ROOT),
    )
    try:
        deadline = time.monotonic() + 15
        while not (url_file.exists() and url_file.read_text().strip()):
            assert proc.poll() is None, (tmp_path / "simulator.log").read_text()
            assert time.monotonic() < deadline, "simulator did not start"
            time.sleep(0.05)
        yield url_file.read_text().strip()
    finally:
        kill_group(proc)
        log.close()


TAP = ROOT / "devtools" / "lsptap.py"


def tapped(cmd: list[str], trace: Path) -> list[str]:
    """``cmd`` (the server's command line) behind devtools/lsptap.py, which records every
    message between the editor and the server in ``trace`` (JSON lines)."""
    return [sys.executable, str(TAP), "--out", str(trace), "--", *cmd]


def tapped_script(path: Path, trace: Path) -> Path:
    """An executable at ``path`` that runs ``python -m sidecar ARGS...`` behind the tap
    (for an editor that takes one executable, as VS Code's ``sidecar.serverPath``)."""
    import shlex

    cmd = tapped([sys.executable, "-m", "sidecar"], trace)
    path.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(c) for c in cmd) + ' "$@"\n')
    path.chmod(0o755)
    return path


#: Where a real-editor test leaves the server's messages (the tap's trace) and what the
#: editor showed ((unix ms, line) pairs, JSON): on failure both go into the report.
LSP_TRACE = "lsp-trace.jsonl"
EDITOR_EVENTS = "editor-events.json"


def tap_report(trace: Path | list[Path], extra: list[tuple[float, str]] | None = None) -> str:
    """What the editor asked and the server answered (devtools.lsptap.summarize: one line a
    message, every server start in the file), merged in time with ``extra`` ((unix ms, line):
    what the editor showed)."""
    from devtools.lsptap import read_trace, summarize

    paths = [trace] if isinstance(trace, Path) else trace
    records = [rec for p in paths for rec in read_trace(p)]
    if not records:
        return f"no LSP trace in {', '.join(map(str, paths))} (the server never started?)"
    return "-> editor to server, <- server to editor; ms from the server's start\n" + summarize(records, extra)


def write_editor_events(tmp_path: Path, events: list[tuple[float, str]]) -> None:
    """Keep what the editor showed ((unix ms, line) pairs) for the failure report."""
    import json

    (tmp_path / EDITOR_EVENTS).write_text(json.dumps([[float(t), str(text)] for t, text in events]))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """A failing test that ran an editor against a tapped server (its ``tmp_path`` holds
    ``LSP_TRACE``) gets a report section with one timeline: every request and answer, update,
    edit and cancel on the LSP channel, with what the editor showed (``EDITOR_EVENTS``)."""
    outcome = yield
    rep = outcome.get_result()
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if rep.when != "call" or not rep.failed or not isinstance(tmp, Path) or not (tmp / LSP_TRACE).exists():
        return
    import json

    try:
        events = [(float(t), str(text)) for t, text in json.loads((tmp / EDITOR_EVENTS).read_text())]
    except (OSError, ValueError, TypeError):
        events = []
    try:
        text = tap_report(tmp / LSP_TRACE, [(t, "   editor: " + line) for t, line in events])
    except Exception as exc:  # the report must never hide the failure itself
        text = f"(the LSP trace could not be read: {exc!r})"
    rep.sections.append(("what the server answered and the editor showed", text))


def skip_or_fail(reason: str) -> None:
    """Skip a test whose tool (an editor) could not be installed here, except where
    ``SIDECAR_REQUIRE_EDITORS=1`` (CI sets it): there a missing editor is a failure, so
    that a green run never hides a test that did not run."""
    if os.environ.get("SIDECAR_REQUIRE_EDITORS") == "1":
        pytest.fail(f"{reason} (SIDECAR_REQUIRE_EDITORS=1)")
    pytest.skip(reason)


def client_capabilities(updates: bool = True) -> types.ClientCapabilities:
    """A client like our editor integrations: UTF-16 positions, inline completion, and
    (unless ``updates=False``, a generic LSP client) it renders sidecar/inlineCompletionUpdate."""
    return types.ClientCapabilities(
        experimental={"sidecar": {"inlineCompletionUpdate": True}} if updates else None,
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
async def sidecar(
    env: dict[str, str],
    init_options: dict[str, Any] | None = None,
    capabilities: types.ClientCapabilities | None = None,
) -> AsyncIterator[LanguageClient]:
    """Start ``python -m sidecar serve`` as a child process and initialize it."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=env, client_factory=make_client
    )
    client = await config.start()
    await client.initialize_session(
        types.InitializeParams(capabilities=capabilities or client_capabilities(), initialization_options=init_options)
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


async def index_stats(client: LanguageClient) -> dict[str, Any]:
    snap = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    return snap["workspace_index"]


async def wait_ready(client: LanguageClient, timeout: float = 15.0) -> tuple[dict[str, Any], float]:
    """Poll ``sidecar.stats`` until the index is ready: (its stats, seconds waited)."""
    start = time.monotonic()
    st: dict[str, Any] = {}
    while time.monotonic() - start < timeout:
        st = await index_stats(client)
        if st.get("state") == "ready":
            return st, time.monotonic() - start
        await asyncio.sleep(0.05)
    raise AssertionError(f"the workspace index was not ready within {timeout} s: {st}")
