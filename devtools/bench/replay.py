"""One benchmark run: a simulated backend process, a sidecar process, and the typist.

Modes (:data:`MODE_SPECS`): ``sidecar`` (``scheduling = "adaptive"``, speculative
prefetch on), ``sidecar-noprefetch`` (the same with ``SIDECAR_PREFETCH=false``) and
``naive`` (a request per keystroke with no debounce, no cancel, no cache and no
prefetch; the server's ``scheduling = "naive"`` runs every stream to its end).

The editor model is VS Code's: every key press is one incremental
``textDocument/didChange`` followed by one ``textDocument/inlineCompletion`` request
(trigger kind Automatic). In the adaptive runs the client also sends
``$/cancelRequest`` for its previous request if that one is still unanswered; by default
(``cancel="before"``) the cancel goes out before the new request, the order VS Code
uses (a document change cancels the running provider call, then the next call starts).
``cancel="after"`` sends it just after the new request, ``"never"`` not at all. In the
``naive`` run the client never cancels.

At a pause (see :mod:`devtools.bench.typist`) the bench looks at the request of the last
key before the pause: its time to suggestion is from that key to its answer, if the
answer arrived before the pause ended and has text. The first
``sidecar/inlineCompletionUpdate`` with text for the same document version is recorded
too. At the end of the pause, if the answer's text is a prefix of the true rest of the
region, the typist accepts it, in VS Code's order: one ``didChange`` inserting it, the
item's ``sidecar.acceptCompletion`` command, then at once a new inline completion
request at the cursor after the accepted text (VS Code re-triggers after its accept
command). The time to suggestion after an accept is from that ``didChange`` to the
answer of the re-request, if it has text and arrives before the next key press (or, after
a file's last accept, within the grace period); typing goes on after the accept.

Backends (``RunOptions.backend``): ``simulated`` (the default) starts the simulated
backend of :mod:`.simproc` for each run and reads its request records afterwards;
``local`` starts no simulator: the sidecar runs its managed engine (llama-cpp-python) with
the model ``SIDECAR_LOCAL_MODEL`` names (or ``SIDECAR_LOCAL_MODEL_PATH``; unset:
``auto``, the installed code model), as a user in local mode types;
``siliconflow`` starts no simulator and lets the sidecar talk to the real SiliconFlow
with the user's ``SILICONFLOW_API_KEY`` (and ``SIDECAR_BASE_URL``, ``SIDECAR_MODEL``,
``SIDECAR_SILICONFLOW_REGION``, ``SIDECAR_FIM`` when set). Acceptance still compares
each suggestion with the file's true continuation; the upstream figures then come from
the sidecar's own counters (``sidecar.stats``), and what only the simulator can see
(per-request timings, tokens streamed) is left out.

Every run also records the times of its key presses and accepts (``keys``) and the
window of each file (``file_windows``), all in seconds from the run's start like the
``requests`` and ``upstream`` records, for the session timeline of :mod:`.report`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from sidecar.tools.demo.client import ServerSession
from sidecar.tools.demo.report import ghost_text
from sidecar.tools.demo.runner import LogTrap, default_server_command, server_environment
from sidecar.tools.demo.typist import position_at

from . import simproc
from .truth import TrueFile
from .typist import FilePlan


@dataclass(frozen=True)
class ModeSpec:
    """How one column of the table runs the sidecar."""

    scheduling: str  # the server's ``scheduling`` setting
    prefetch: bool  # ``SIDECAR_PREFETCH``
    cache: bool  # ``SIDECAR_CACHE`` (an empty cache in the run's own directory)
    client_cancels: bool  # the client sends ``$/cancelRequest`` (per ``RunOptions.cancel``)


MODE_SPECS: dict[str, ModeSpec] = {
    "sidecar": ModeSpec("adaptive", prefetch=True, cache=True, client_cancels=True),
    "sidecar-noprefetch": ModeSpec("adaptive", prefetch=False, cache=True, client_cancels=True),
    "naive": ModeSpec("naive", prefetch=False, cache=False, client_cancels=False),
}
MODES = {name: spec.scheduling for name, spec in MODE_SPECS.items()}
DEFAULT_MODES = ("sidecar", "sidecar-noprefetch", "naive")
GENERATION_PATHS = ("/v1/completions", "/v1/chat/completions")
BACKENDS = ("simulated", "siliconflow", "local")
#: Environment variables of the user's that a ``local`` run passes to the sidecar.
LOCAL_ENV = (
    "SIDECAR_LOCAL_MODEL",
    "SIDECAR_LOCAL_MODEL_PATH",
    "SIDECAR_MODELS_DIR",
    "SIDECAR_LOCAL_N_GPU_LAYERS",
    "SIDECAR_LOCAL_THREADS",
)
#: Environment variables of the user's that a ``siliconflow`` run passes to the sidecar.
SILICONFLOW_ENV = (
    "SILICONFLOW_API_KEY",
    "SIDECAR_BASE_URL",
    "SIDECAR_MODEL",
    "SIDECAR_SILICONFLOW_REGION",
    "SIDECAR_FIM",
)


def siliconflow_key() -> str | None:
    """The user's ``SILICONFLOW_API_KEY`` (None when unset or blank)."""
    import os

    key = os.environ.get("SILICONFLOW_API_KEY", "").strip()
    return key or None


@dataclass
class RunOptions:
    """Settings shared by the runs of one benchmark. ``latency`` holds
    :class:`~devtools.simulator.LatencyModel` keys (ms, tokens/s)."""

    seed: int = 0
    latency: dict[str, Any] = field(
        default_factory=lambda: {"ttft_ms": 400.0, "ttft_jitter": 0.3, "tokens_per_s": 50.0}
    )
    wrong_rate: float = 0.25
    warmup_s: float = 1.0  # after opening a document, before the first key
    grace_s: float = 10.0  # after the last key, for outstanding answers
    cancel: str = "before"  # sidecar run: "before" / "after" the new request (VS Code: before), or "never"
    startup_timeout_s: float = 60.0
    settings: dict[str, str] = field(default_factory=dict)  # sidecar settings for both runs (config file)
    backend: str = "simulated"  # or "siliconflow": the real API with the user's key (no simulator)
    # The workspace folder sent at initialize (default: the first file's folder). A large
    # one (--workspace) makes the sidecar's workspace index build while the typing runs.
    workspace: str | None = None


@dataclass
class LspRequest:
    """One LSP request the bench sent. Times are ``time.monotonic()`` seconds."""

    id: str
    kind: str  # "inline" or "command"
    uri: str
    version: int
    cursor: int
    sent: float
    line_before: str = ""
    answered: float | None = None
    text: str = ""
    item: Any = None
    error: str | None = None
    cancel_sent: bool = False
    current: bool | None = None  # answered while the document was still at ``version``
    expected: str | None = None  # what the typist types next, to the region's end (inline)

    def to_dict(self, t0: float) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "uri": self.uri,
            "version": self.version,
            "sent_s": round(self.sent - t0, 4),
            "answered_s": None if self.answered is None else round(self.answered - t0, 4),
            "latency_ms": None if self.answered is None else round((self.answered - self.sent) * 1000, 2),
            "text": self.text,
            "error": self.error,
            "cancel_sent": self.cancel_sent,
            "current": self.current,
        }


@dataclass
class PauseRecord:
    """One pause of the typist and what the editor showed during it."""

    file: str
    kind: str
    key_index: int
    line: int
    column: int
    duration_ms: float
    request_id: str
    tts_ms: float | None = None  # to the first answer with text, if within the pause
    update_ms: float | None = None  # to the first update notification with text, if within
    update_text: str | None = None  # the latest update's text at the end of the pause
    answered_empty_ms: float | None = None  # answered within the pause, but with nothing
    suggestion: str | None = None
    correct: bool = False
    accepted: bool = False


@dataclass
class AcceptRecord:
    """One accept and the suggestion (if any) the editor showed right after it.

    The window is from the accept (its ``didChange``) to the next key press, or to the
    end of the file's grace period after its last key. ``tts_ms`` is set when the
    re-request's answer had text and arrived within the window; ``late_ms`` when it had
    text but came after the window; ``answered_empty_ms`` when it came within the window
    with nothing. An accept that reaches the end of the typed region (the simulated model
    never answers past it, the document already has what follows) is recorded with
    ``region_end`` and left out of the figures."""

    file: str
    key_index: int
    line: int
    column: int
    chars: int
    ends_line: bool  # the accepted text ends its line (the true file has a line break next)
    region_end: bool  # it reaches the end of the typed region: nothing is left to suggest
    request_id: str
    version: int
    window_ms: float | None = None
    next_key: bool = True  # False after a file's last accept (the window is the grace period)
    tts_ms: float | None = None
    late_ms: float | None = None
    answered_empty_ms: float | None = None
    update_ms: float | None = None  # first update notification with text, within the window
    suggestion: str | None = None
    error: str | None = None


def _describe(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    text = str(exc) or type(exc).__name__
    return f"error {code}: {text}" if code is not None else text


def seed_speed_cache(cache_home: Path) -> bool:
    """Copy the user's model-speed cache (``sidecar.models.speed.cache_path()``, as this
    process resolves it) to where a server started with ``XDG_CACHE_HOME=cache_home``
    reads it. Returns whether a file was copied (False when the user has none or it
    could not be copied: the server then judges unmeasured models by hardware)."""
    import shutil

    from sidecar.models import speed

    src = speed.cache_path()
    dst = cache_home / src.parent.name / src.name
    if not src.is_file() or dst == src:
        return False
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    except OSError:
        return False
    return True


class ModeRun:
    """Type every plan into one sidecar started in ``mode`` (a key of :data:`MODE_SPECS`)."""

    def __init__(
        self,
        mode: str,
        plans: list[FilePlan],
        opts: RunOptions,
        workdir: Path,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        if mode not in MODE_SPECS:
            raise ValueError(f"unknown mode {mode!r} (expected one of {sorted(MODE_SPECS)})")
        self.mode = mode
        self.spec = MODE_SPECS[mode]
        self.plans = plans
        self.opts = opts
        self.workdir = workdir / mode
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.progress = progress or (lambda _m: None)
        self.server_messages: list[str] = []
        self.session = ServerSession(on_update=self._on_update, on_message=self._on_message)
        self.requests: list[LspRequest] = []
        self.commands: list[LspRequest] = []
        self.pauses: list[PauseRecord] = []
        self.accept_records: list[AcceptRecord] = []
        self._accept_requests: list[tuple[AcceptRecord, LspRequest, float]] = []
        self._open_accept: tuple[AcceptRecord, LspRequest, float] | None = None
        self.first_update: dict[tuple[str, int], float] = {}
        self.latest_update: dict[tuple[str, int], str] = {}
        self.updates = 0
        self.keys_typed = 0
        self.accepts = 0
        self.accepted_chars = 0
        self.key_lateness_ms: list[float] = []
        self.key_log: list[dict[str, Any]] = []  # key presses and accepts (monotonic times)
        self.file_windows: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._seq = 0
        self._pending: set[asyncio.Future] = set()
        if opts.cancel not in ("before", "after", "never"):
            raise ValueError(f"cancel must be 'before', 'after' or 'never', got {opts.cancel!r}")
        self.cancel_order = opts.cancel if self.spec.client_cancels else "never"
        if opts.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {opts.backend!r}")
        if opts.backend == "siliconflow" and siliconflow_key() is None:
            raise ValueError("the siliconflow backend needs SILICONFLOW_API_KEY in the environment")

    # -------------------------------------------------------------- processes
    async def _start_sim(self) -> tuple[asyncio.subprocess.Process, str]:
        url_file = self.workdir / "sim-url.txt"
        spec = {
            "files": [TrueFile(p.name, p.text, p.start, p.end).to_dict() for p in self.plans],
            "seed": self.opts.seed,
            "wrong_rate": self.opts.wrong_rate,
            "latency": {**self.opts.latency, "seed": self.opts.seed},
            "url_file": str(url_file),
        }
        spec_path = self.workdir / "sim-spec.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        self._sim_log = open(self.workdir / "sim-stderr.log", "wb")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devtools.bench.simproc",
            str(spec_path),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=self._sim_log,
            env=server_environment(None, default_command=True),
        )
        deadline = time.monotonic() + 30
        while not url_file.exists():
            if proc.returncode is not None or time.monotonic() > deadline:
                await self._stop_sim(proc)
                raise RuntimeError(f"the simulated backend did not start (see {self.workdir / 'sim-stderr.log'})")
            await asyncio.sleep(0.05)
        return proc, url_file.read_text().strip()

    async def _stop_sim(self, proc: asyncio.subprocess.Process) -> None:
        await simproc.stop(proc, self._sim_log)

    async def _sim_records(self, base_url: str) -> list[dict[str, Any]]:
        import aiohttp

        url = base_url[: -len("/v1")] + "/_sim/requests"
        async with aiohttp.ClientSession() as http:
            async with http.get(url, timeout=aiohttp.ClientTimeout(total=30)) as resp:
                data = await resp.json()
        keep = (
            "index",
            "path",
            "received_at",
            "first_token_at",
            "ended_at",
            "tokens_sent",
            "tokens_total",
            "text_sent",
            "finish_reason",
            "completed",
            "disconnected",
            "disconnected_at",
            "status",
        )
        return [{k: r.get(k) for k in keep} for r in data]

    def _config_file(self) -> Path:
        """The sidecar's config file: the ``--set`` settings, or a path that does not exist
        (so a user's own config file never leaks into a benchmark)."""
        path = self.workdir / "config.toml"
        if self.opts.settings:
            path.write_text(
                "".join(f"{k} = {json.dumps(str(v))}\n" for k, v in self.opts.settings.items()), encoding="utf-8"
            )
        return path

    def _server_env(self, base_url: str | None) -> dict[str, str]:
        if self.opts.backend == "siliconflow":
            return self._real_env()
        if self.opts.backend == "local":
            return self._local_env()
        # The simulator plays SiliconFlow on loopback, which is not a SiliconFlow host:
        # the provider is named so that the sidecar sends SiliconFlow's request shape
        # (unless ``--set provider=...`` chose one in the config file).
        provider = {} if "provider" in self.opts.settings else {"SIDECAR_PROVIDER": "siliconflow"}
        ours = {"SILICONFLOW_API_KEY": "sk-bench", "SIDECAR_BASE_URL": base_url, **provider, **self._common_env()}
        env = server_environment(ours, default_command=True)
        return {k: v for k, v in env.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in ours}

    def _common_env(self) -> dict[str, str]:
        """The settings every run of this mode gets; the naive baseline has no cache, and
        the sidecar's cache (if any) starts empty in this run's own directory. The
        models' measured speeds are a fact of the machine, not a cache of answers: they
        are copied in (:func:`seed_speed_cache`), so ``local_model = "auto"`` picks what
        it picks for the user."""
        seed_speed_cache(self.workdir / "cache")
        return {
            "SIDECAR_SCHEDULING": self.spec.scheduling,
            "SIDECAR_PREFETCH": "true" if self.spec.prefetch else "false",
            "SIDECAR_CONFIG": str(self._config_file()),
            "SIDECAR_LOG_LEVEL": str(self.opts.settings.get("log_level", "warning")),  # --set log_level=debug
            "XDG_CACHE_HOME": str(self.workdir / "cache"),
            "XDG_STATE_HOME": str(self.workdir / "state"),
            "SIDECAR_CACHE": "true" if self.spec.cache else "false",
        }

    def _real_env(self) -> dict[str, str]:
        """The real SiliconFlow: the user's key (and base URL, model, region, FIM
        strategy when set), the cloud side forced, nothing else of the user's sidecar
        settings (the ``--set`` config file as in a simulated run)."""
        import os

        user = {k: os.environ[k] for k in SILICONFLOW_ENV if os.environ.get(k, "").strip()}
        env = server_environment(
            {**self._common_env(), **user, "SIDECAR_PROVIDER": "siliconflow", "SIDECAR_MODE": "cloud"},
            default_command=True,
        )
        keep = {*self._common_env(), *user, "SIDECAR_PROVIDER", "SIDECAR_MODE"}
        return {k: v for k, v in env.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in keep}

    def _local_env(self) -> dict[str, str]:
        """Local mode on the managed engine: the user's model choice (``LOCAL_ENV``), no
        key, nothing else of the user's sidecar settings."""
        import os

        user = {k: os.environ[k] for k in LOCAL_ENV if os.environ.get(k, "").strip()}
        ours = {**self._common_env(), **user, "SIDECAR_MODE": "local"}
        env = server_environment(ours, default_command=True)
        return {k: v for k, v in env.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_")) or k in ours}

    # -------------------------------------------------------------- the run
    async def run(self) -> dict[str, Any]:
        sim: asyncio.subprocess.Process | None = None
        base_url: str | None = None
        if self.opts.backend == "simulated":
            sim, base_url = await self._start_sim()
        trap = LogTrap()
        pygls_log = logging.getLogger("pygls")
        old_propagate = pygls_log.propagate
        pygls_log.addHandler(trap)
        pygls_log.propagate = False
        records: list[dict[str, Any]] = []
        stats: dict[str, Any] | None = None
        t0 = time.monotonic()
        started = ended = t0
        try:
            root = Path(self.opts.workspace or Path(self.plans[0].path).resolve().parent).resolve().as_uri()
            await self.session.start(
                default_server_command(), self._server_env(base_url), root, timeout_s=self.opts.startup_timeout_s
            )
            started = time.monotonic()
            for i, plan in enumerate(self.plans):
                self.progress(
                    f"{self.mode}: typing {plan.name} lines {plan.first_line}-{plan.last_line} "
                    f"({len(plan.keys)} keys, file {i + 1}/{len(self.plans)})"
                )
                await self._type_file(plan)
            await self._wait_answers(self.opts.grace_s)
            ended = time.monotonic()
            stats = await self.session.server_stats()
        except Exception as exc:  # report, don't hide: the table shows the run failed
            self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            await self.session.close()
            if sim is not None and base_url is not None:
                try:
                    records = await self._sim_records(base_url)
                except Exception as exc:
                    self.errors.append(f"could not read the simulated backend's records: {exc}")
                await self._stop_sim(sim)
            pygls_log.removeHandler(trap)
            pygls_log.propagate = old_propagate
        return self._raw(t0, started, ended, records, stats, trap.messages)

    async def _wait_answers(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if all(r.answered is not None for r in self.requests + self.commands):
                return
            await asyncio.sleep(0.05)

    async def _type_file(self, plan: FilePlan) -> None:
        s = self.session
        uri = Path(plan.path).resolve().as_uri()
        s.open(uri, plan.language, plan.opened_text)
        window = {
            "file": plan.name,
            "path": plan.path,
            "uri": uri,
            "opened": time.monotonic(),
            "first_key": None,
            "closed": None,
        }
        self.file_windows.append(window)
        await asyncio.sleep(self.opts.warmup_s)
        cursor = plan.start
        t_last = time.monotonic()
        last: LspRequest | None = None
        while cursor < plan.end:
            if not s.alive:
                raise RuntimeError(
                    f"the sidecar stopped (exit code {s.returncode}); stderr: {list(s.stderr_tail)[-5:]}"
                )
            k = plan.key_index_at(cursor)
            key = plan.keys[k]
            due = t_last + key.delay_s
            now = time.monotonic()
            if due > now:
                await asyncio.sleep(due - now)
            paused = key.pause if key.pause and last is not None else None
            if paused:
                pause = self._judge_pause(plan, k, key.pause, last, t_last, cursor)
                if pause.correct and pause.suggestion:
                    pause.accepted = True
                    t_pause = t_last
                    t_last, last = self._accept(plan, uri, cursor, pause.suggestion, last, due)
                    self._log_key(t_last, plan, "accept", pause.suggestion, paused, t_pause, last)
                    cursor += len(pause.suggestion)
                    continue
            text = plan.text[cursor : key.end]  # a whole key, or what is left of it after an accept
            t_prev = t_last
            t_last, last = self._press(plan, uri, cursor, text, last, due)
            self._log_key(t_last, plan, "key", text, paused, t_prev if paused else None, last)
            if window["first_key"] is None:
                window["first_key"] = t_last
            self.keys_typed += 1
            cursor += len(text)
        if s.text != plan.document_at(cursor):
            self.errors.append(f"{plan.name}: the bench's document diverged from the true file")
        # Let the last answers of this file arrive before closing it.
        await self._wait_answers(self.opts.grace_s)
        self._close_accept(time.monotonic(), next_key=False)
        window["closed"] = time.monotonic()
        s.client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        s.uri = None

    def _log_key(
        self,
        t: float,
        plan: FilePlan,
        kind: str,
        text: str,
        pause: str | None,
        pause_from: float | None,
        req: LspRequest,
    ) -> None:
        """One key press or accept for the timeline: ``pause`` is the kind of pause that
        ended here (from ``pause_from``, the previous key), ``request_id`` the completion
        request it sent."""
        self.key_log.append(
            {
                "t": t,
                "file": plan.name,
                "kind": kind,
                "chars": len(text),
                "text": text if kind == "accept" else None,
                "pause": pause,
                "pause_from": pause_from,
                "request_id": req.id,
            }
        )

    def _press(
        self, plan: FilePlan, uri: str, cursor: int, text: str, last: LspRequest | None, due: float
    ) -> tuple[float, LspRequest]:
        """Insert ``text`` at ``cursor`` (one didChange) and ask for a completion."""
        t = self._insert(cursor, text, due)
        req = self._ask(uri, cursor + len(text), last)
        req.expected = plan.text[cursor + len(text) : plan.end]
        return t, req

    def _insert(self, cursor: int, text: str, due: float) -> float:
        """One didChange; the key press that ends the window of the previous accept."""
        self._close_accept(time.monotonic())
        line, character = position_at(self.session.text, cursor)
        self.session.insert(line, character, text, cursor)
        t = time.monotonic()
        self.key_lateness_ms.append((t - due) * 1000)
        return t

    def _accept(
        self, plan: FilePlan, uri: str, cursor: int, suggestion: str, last: LspRequest, due: float
    ) -> tuple[float, LspRequest]:
        """Accept ``suggestion`` as VS Code does: the edit, the item's command, then a new
        request at the cursor after the accepted text."""
        item = last.item
        t = self._insert(cursor, suggestion, due)
        self.accepts += 1
        self.accepted_chars += len(suggestion)
        cmd = getattr(item, "command", None)
        if cmd is not None:
            self._send(
                types.WORKSPACE_EXECUTE_COMMAND,
                types.ExecuteCommandParams(command=cmd.command, arguments=cmd.arguments),
                "command",
                uri,
                0,
                cursor,
                "",
            )
        end = cursor + len(suggestion)
        req = self._ask(uri, end, last)
        line, column = position_at(plan.text, end)
        rec = AcceptRecord(
            plan.name,
            plan.key_index_at(cursor),
            line + 1,
            column + 1,
            len(suggestion),
            plan.text.startswith("\n", end) or end >= len(plan.text),
            end >= plan.end,
            req.id,
            req.version,
        )
        self._open_accept = (rec, req, t)
        return t, req

    def _close_accept(self, now: float, next_key: bool = True) -> None:
        """End the window of the open accept at ``now`` and record what it showed."""
        if self._open_accept is None:
            return
        rec, req, t = self._open_accept
        self._open_accept = None
        rec.window_ms = round((now - t) * 1000, 1)
        rec.next_key = next_key
        if req.answered is not None and req.answered <= now:
            ms = round((req.answered - t) * 1000, 1)
            if req.text:
                rec.tts_ms = ms
                rec.suggestion = req.text
            else:
                rec.answered_empty_ms = ms
        upd = self.first_update.get((req.uri, req.version))
        if upd is not None and upd <= now:
            rec.update_ms = round((upd - t) * 1000, 1)
        self.accept_records.append(rec)
        self._accept_requests.append((rec, req, t))

    def _settle_accepts(self) -> None:
        """After the run: the answers that came after their accept's window (or errors)."""
        for rec, req, t in self._accept_requests:
            rec.error = req.error
            if rec.tts_ms is None and req.text and req.answered is not None:
                rec.late_ms = round((req.answered - t) * 1000, 1)

    def _cancel(self, last: LspRequest | None) -> None:
        if last is not None and last.answered is None and not last.cancel_sent:
            last.cancel_sent = True
            self.session.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=last.id))

    def _ask(self, uri: str, cursor: int, last: LspRequest | None) -> LspRequest:
        if self.cancel_order == "before":
            self._cancel(last)
        text = self.session.text
        line, character = position_at(text, cursor)
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        line_before = text[text.rfind("\n", 0, cursor) + 1 : cursor]
        req = self._send(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, "inline", uri, self.session.version, cursor, line_before
        )
        if self.cancel_order == "after":
            self._cancel(last)
        return req

    def _send(
        self, method: str, params: Any, kind: str, uri: str, version: int, cursor: int, line_before: str
    ) -> LspRequest:
        self._seq += 1
        req = LspRequest(f"{self.mode}-{self._seq}", kind, uri, version, cursor, time.monotonic(), line_before)
        (self.requests if kind == "inline" else self.commands).append(req)
        fut = self.session.client.protocol.send_request_async(method, params, msg_id=req.id)
        self._pending.add(fut)
        fut.add_done_callback(lambda f, r=req: self._answered(r, f))
        return req

    def _answered(self, req: LspRequest, fut: asyncio.Future) -> None:
        self._pending.discard(fut)
        req.answered = time.monotonic()
        req.current = self.session.uri == req.uri and self.session.version == req.version
        if fut.cancelled():
            req.error = "cancelled in the client"
            return
        exc = fut.exception()
        if exc is not None:
            req.error = _describe(exc)
            return
        if req.kind != "inline":
            return
        result = fut.result()
        items = list(result.items) if isinstance(result, types.InlineCompletionList) else list(result or [])
        if items:
            req.item = items[0]
            req.text = ghost_text(items[0], req.line_before, len(req.line_before))

    def _on_message(self, kind: str, text: str) -> None:
        if kind != "status" and len(self.server_messages) < 50:
            self.server_messages.append(f"{kind}: {text}")

    def _on_update(self, params: dict) -> None:
        self.updates += 1
        items = params.get("items") or []
        first = items[0] if items else {}
        text = first.get("insertText") if isinstance(first, dict) else None
        if isinstance(text, dict):
            text = text.get("value")
        key = (params.get("uri"), params.get("version"))
        self.latest_update[key] = text or ""
        if text and key not in self.first_update:
            self.first_update[key] = time.monotonic()

    def _judge_pause(
        self, plan: FilePlan, k: int, kind: str, req: LspRequest, t_last: float, cursor: int
    ) -> PauseRecord:
        now = time.monotonic()
        line, column = position_at(plan.text, cursor)
        rec = PauseRecord(plan.name, kind, k, line + 1, column + 1, round((now - t_last) * 1000, 1), req.id)
        if req.answered is not None and req.answered <= now:
            ms = (req.answered - t_last) * 1000
            if req.text:
                rec.tts_ms = round(ms, 1)
                rec.suggestion = req.text
                rec.correct = plan.text[cursor : plan.end].startswith(req.text)
            else:
                rec.answered_empty_ms = round(ms, 1)
        upd = self.first_update.get((req.uri, req.version))
        if upd is not None and upd <= now:
            rec.update_ms = round((upd - t_last) * 1000, 1)
            rec.update_text = self.latest_update.get((req.uri, req.version))
        self.pauses.append(rec)
        return rec

    # -------------------------------------------------------------- results
    def _raw(
        self,
        t0: float,
        started: float,
        ended: float,
        records: list[dict[str, Any]],
        stats: dict[str, Any] | None,
        client_warnings: list[str],
    ) -> dict[str, Any]:
        for r in records:
            for k in ("received_at", "first_token_at", "ended_at", "disconnected_at"):
                if r.get(k) is not None:
                    r[k] = round(r[k] - t0, 4)
        inline = self.requests
        self._settle_accepts()

        def rel(t: float | None) -> float | None:
            return None if t is None else round(t - t0, 4)

        keys = [{**k, "t": rel(k["t"]), "pause_from": rel(k["pause_from"])} for k in self.key_log]
        windows = [
            {
                "file": w["file"],
                "path": w["path"],
                "uri": w["uri"],
                "opened_s": rel(w["opened"]),
                "first_key_s": rel(w["first_key"]),
                "closed_s": rel(w["closed"]),
            }
            for w in self.file_windows
        ]
        return {
            "mode": self.mode,
            "backend": self.opts.backend,
            "scheduling": self.spec.scheduling,
            "prefetch": self.spec.prefetch,
            "client_cancels_previous": self.cancel_order,
            "wall_s": round(ended - started, 2),
            "keys_typed": self.keys_typed,
            "accepts": self.accepts,
            "keystrokes": self.keys_typed + self.accepts,
            "accepted_chars": self.accepted_chars,
            "files": [
                {
                    "path": p.path,
                    "first_line": p.first_line,
                    "last_line": p.last_line,
                    "planned_keys": len(p.keys),
                    "planned_pauses": p.pause_count,
                }
                for p in self.plans
            ],
            "lsp": {
                "inline_sent": len(inline),
                "inline_answered": sum(1 for r in inline if r.answered is not None),
                "commands_sent": len(self.commands),
                "commands_answered": sum(1 for r in self.commands if r.answered is not None),
                "cancels_sent": sum(1 for r in inline if r.cancel_sent),
                "errors": sum(1 for r in inline if r.error),
                "non_empty_answers": sum(1 for r in inline if r.text),
                # Per key: a suggestion shown before the next key (answered with text
                # while the document was still the one asked about), and one the typist
                # then typed (the typed text continues with it).
                "keys_asked": sum(1 for r in inline if r.expected is not None),
                "keys_shown": sum(1 for r in inline if r.expected is not None and r.text and r.current),
                "keys_shown_right": sum(
                    1
                    for r in inline
                    if r.expected is not None and r.text and r.current and r.expected.startswith(r.text)
                ),
                "keys_shown_ms": [
                    round((r.answered - r.sent) * 1000, 1)
                    for r in inline
                    if r.expected is not None and r.text and r.current and r.answered is not None
                ],
                "update_notifications": self.updates,
            },
            "key_lateness_ms": _summary(self.key_lateness_ms),
            "pauses": [asdict(p) for p in self.pauses],
            "after_accept": [asdict(a) for a in self.accept_records],
            "upstream": records,
            "upstream_source": "simulator" if self.opts.backend == "simulated" else "sidecar.stats",
            "server_stats": stats,
            "keys": keys,
            "file_windows": windows,
            "requests": [r.to_dict(t0) for r in inline],
            "client_warnings": client_warnings,
            "server_messages": self.server_messages,
            "server_stderr_tail": list(self.session.stderr_tail),
            "errors": self.errors,
        }


def _summary(xs: list[float]) -> dict[str, float | None]:
    if not xs:
        return {"count": 0, "mean": None, "max": None}
    return {"count": len(xs), "mean": round(sum(xs) / len(xs), 2), "max": round(max(xs), 2)}


async def run_modes(
    modes: list[str],
    plans: list[FilePlan],
    opts: RunOptions,
    workdir: Path,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Run each mode in turn (each with its own backend and sidecar process)."""
    out: dict[str, dict[str, Any]] = {}
    for mode in modes:
        out[mode] = await ModeRun(mode, plans, opts, workdir, progress).run()
    return out


__all__ = [
    "BACKENDS",
    "DEFAULT_MODES",
    "MODES",
    "MODE_SPECS",
    "ModeRun",
    "ModeSpec",
    "RunOptions",
    "run_modes",
    "siliconflow_key",
]
