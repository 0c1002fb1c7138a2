"""``run_demo``: type into a real file through a real LSP session and time the answers."""

from __future__ import annotations

import argparse
import asyncio
import importlib.resources
import json
import logging
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from .client import ServerSession
from .report import Reporter, backend_label, ghost_text, item_text, latency_stats
from .typist import TypingPlan, plan_typing, utf16_len


def _packaged_demo_file() -> Path | None:
    """The copy of ``fixtures/demo/inventory.py`` that a wheel carries as
    ``sidecar/tools/demo/data/inventory.py`` (setup.py maps the folder), or None."""
    try:
        found = importlib.resources.files(__package__ or "sidecar.tools.demo") / "data" / "inventory.py"
    except (ImportError, TypeError):  # pragma: no cover - imported oddly
        return None
    return found if isinstance(found, Path) and found.is_file() else None


#: The file typed when none is given: the team's fixture, ``fixtures/demo/inventory.py``
#: in a source checkout, or the wheel's copy of it.
DEFAULT_FILE = _packaged_demo_file() or Path(__file__).resolve().parents[3] / "fixtures" / "demo" / "inventory.py"


def default_file() -> Path:
    """:data:`DEFAULT_FILE`; in an install that has neither the fixture nor its packaged
    copy, a real module from Python's standard library (``textwrap.py``)."""
    if DEFAULT_FILE.is_file():
        return DEFAULT_FILE
    import textwrap

    return Path(textwrap.__file__)


_LANGUAGES = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".jsx": "javascriptreact",
    ".ts": "typescript",
    ".tsx": "typescriptreact",
    ".rs": "rust",
    ".go": "go",
    ".java": "java",
    ".kt": "kotlin",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".hpp": "cpp",
    ".cs": "csharp",
    ".rb": "ruby",
    ".php": "php",
    ".swift": "swift",
    ".lua": "lua",
    ".sh": "shellscript",
    ".md": "markdown",
    ".toml": "toml",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".html": "html",
    ".css": "css",
}

_OPTION_NAMES = ("file", "pauses", "seed", "speed", "server_command", "env", "json_out")


def language_id(path: Path) -> str:
    """LSP language identifier for ``path``, by extension ("plaintext" if unknown)."""
    return _LANGUAGES.get(path.suffix.lower(), "plaintext")


def default_server_command() -> list[str]:
    """``python -m sidecar serve`` with this interpreter."""
    return [sys.executable, "-m", "sidecar", "serve"]


def server_environment(extra: dict[str, Any] | None, default_command: bool) -> dict[str, str]:
    """``os.environ`` with ``extra`` on top. For the default command, the directory
    holding this ``sidecar`` package goes first on PYTHONPATH so that the server
    is the same code as the demo, even when the package is not installed."""
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (extra or {}).items()})
    if default_command:
        root = str(Path(__file__).resolve().parents[3])
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if root not in parts:
            env["PYTHONPATH"] = os.pathsep.join([root, *parts])
    return env


@dataclass
class _Watch:
    """The request (a pause or the cold start) currently waiting for its suggestion, for
    matching streamed updates. ``text`` is the latest update's text, ``done`` whether the
    server marked an update as the last, ``text_ms`` when the first non-empty text came."""

    uri: str
    version: int
    line: int
    character: int
    started: float
    updates: int = 0
    first_update_ms: float | None = None
    text: str = ""
    done: bool = False
    text_ms: float | None = None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    async def next_update(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` seconds for the next matching update."""
        self.arrived.clear()
        try:
            await asyncio.wait_for(self.arrived.wait(), max(timeout_s, 0.0))
        except TimeoutError:
            pass


def _has_text(items: list[types.InlineCompletionItem]) -> bool:
    return bool(items) and bool(item_text(items[0]).strip())


class LogTrap(logging.Handler):
    """Keeps pygls client warnings (late answers, cancelled ids) out of the terminal or a
    bench's table: the first line of each of the first 50 goes to ``messages``, for the
    summary. Used by the demo and the benches."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) < 50:
            self.messages.append(record.getMessage().splitlines()[0][:300])


#: A server notice about the local engine dying: "... crashed with SIGSEGV (signal 11) ...",
#: "... exited with code 1 ..." (the wording of ``engine_start.describe_exit``).
_ENGINE_DIED = re.compile(r"local engine (?:crashed with (?P<signal>[A-Z0-9]+)|exited with code -?\d+)")

#: Log notices worth showing: the engine's restarts, crashes and failures.
_RELEVANT_LOG = re.compile(
    r"crash|SIG[A-Z]|exited with|restart|fail|gave up|error|not ready|not installed"
    r"|missing|not found",
    re.IGNORECASE,
)


def _strip_prefix(text: str) -> str:
    return text[len("sidecar: ") :] if text.startswith("sidecar: ") else text


def engine_findings(notices: list[dict[str, str]]) -> dict[str, Any]:
    """What the server's notices (``{"kind", "text"}``; kind: a showMessage type or "log") say
    about the local engine: ``died`` (it crashed or exited), ``signal`` (the first signal
    named, e.g. "SIGSEGV"), ``gave_up`` (the server stopped restarting it), ``message``
    (the most telling notice: the permanent error, else the last death notice)."""
    signal: str | None = None
    died: list[str] = []  # distinct notices
    gave_up: str | None = None
    for n in notices:
        text = _strip_prefix(n["text"])
        m = _ENGINE_DIED.search(text)
        if m:
            died.append(text)
            signal = signal or m.group("signal")
        if n["kind"] == "error" and "local engine" in text:
            gave_up = gave_up or (text if "gave up" in text else None)
    return {
        "died": bool(died),
        "crashed": signal is not None,
        "signal": signal,
        "gave_up": gave_up is not None,
        "message": gave_up or (died[-1] if died else None),
    }


def judge(
    *,
    server_ok: bool,
    shown: int,
    pauses: int,
    requests_sent: int,
    cold_shown: bool,
    unanswered: int,
    notices: list[dict[str, str]],
    errors: list[str],
) -> dict[str, Any]:
    """The run's verdict. ``ok`` only when the server started, at least one suggestion was
    shown (at a pause; with no pauses, at the cold start), every planned request was sent
    and answered, and the server reported neither an engine death nor an error.

    ``reasons`` says why not, most telling first (``failure`` is the first); ``cause`` is
    the likely cause of the trouble: the server's own notice about the engine's death (the
    permanent error when it gave up), else its first error, else the demo's first error."""
    engine = engine_findings(notices)
    server_errors = [_strip_prefix(n["text"]) for n in notices if n["kind"] == "error"]
    cause = engine["message"] or (server_errors[0] if server_errors else None) or (errors[0] if errors else None)
    reasons: list[str] = []
    if not server_ok:
        reasons.append(f"the server did not start: {errors[0] if errors else 'unknown error'}")
    else:
        if (shown == 0) if pauses else not cold_shown:
            where = f"0 of {pauses} pauses" if pauses else "the cold start; no pauses"
            reasons.append(f"no suggestion was shown ({where}): {cause or 'every answer was empty'}")
        said = " ".join(reasons)
        if engine["message"] and engine["message"] not in said:
            reasons.append(engine["message"])
        for err in server_errors:
            if err not in " ".join(reasons):
                reasons.append(f"the server reported an error: {err}")
        if unanswered:
            first = next((e for e in errors if e not in " ".join(reasons)), None)
            reasons.append(
                f"{unanswered} request{'s' if unanswered > 1 else ''} got no answer" + (f" ({first})" if first else "")
            )
        if requests_sent < pauses:
            first = next((e for e in errors if e not in " ".join(reasons)), None)
            reasons.append(f"only {requests_sent} of {pauses} pauses were reached" + (f" ({first})" if first else ""))
    return {
        "ok": not reasons,
        "verdict": "FAIL" if reasons else "PASS",
        "failure": reasons[0] if reasons else None,
        "reasons": reasons,
        "cause": cause,
        "engine": engine,
    }


def _cursor_line(text: str, offset: int) -> tuple[str, str]:
    """The cursor's line split at code-point ``offset``: (before, after)."""
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    end = len(text) if end < 0 else end
    return text[start:offset], text[offset:end]


async def run_demo(
    file: str | None = None,
    pauses: int = 8,
    seed: int = 0,
    speed: float = 1.0,
    server_command: list[str] | None = None,
    env: dict | None = None,
    json_out: str | None = None,
    *,
    request_timeout: float = 60.0,
    stream: Any = None,
) -> dict:
    """Type part of ``file`` into a live sidecar server and measure its suggestions.

    Starts ``server_command`` (an argv list, or one shell-quoted string; default
    ``python -m sidecar serve``) with
    ``os.environ`` plus ``env``, opens ``file`` (default: the inventory fixture)
    with one region removed, and types that region back in like a person:
    ``speed`` divides all typing delays (1.0 is about 8 keys per second), ``seed``
    fixes every random choice and ``pauses`` is the number of stops at which an
    automatic inline completion is requested and shown. Each request may take
    ``request_timeout`` seconds (the cold-start warm-up twice that); an empty answer
    whose suggestion then comes as ``sidecar/inlineCompletionUpdate`` (the server's
    deadline passed while the model loaded) is shown with the time its text came,
    within the same limit.

    Returns the summary (times in milliseconds) and writes it as JSON to
    ``json_out`` when given. Server trouble is reported in the summary, never
    raised: ``ok`` (see :func:`judge`), ``verdict`` ("PASS"/"FAIL"), ``failure`` and
    ``failure_reasons``, ``engine`` (a crash the server reported), ``server_notices``
    (its error/warning messages and engine log notices), ``errors``; bad arguments (a missing file,
    ``speed <= 0``) raise ``OSError``/``ValueError``. An ``argparse.Namespace`` passed as
    ``file`` is read for all the options above.
    """
    if isinstance(file, argparse.Namespace):
        ns = file
        opts = {k: getattr(ns, k) for k in _OPTION_NAMES if getattr(ns, k, None) is not None}
        if getattr(ns, "request_timeout", None) is not None:
            request_timeout = ns.request_timeout
        if getattr(ns, "tiny", False):  # --tiny: the shipped SmolLM2 (see cli.demo_env)
            from .cli import demo_env

            opts["env"] = demo_env(opts.get("env"), tiny=True)
        return await run_demo(**opts, request_timeout=request_timeout, stream=stream)
    if speed <= 0:
        raise ValueError("speed must be positive")
    if isinstance(server_command, str):
        server_command = shlex.split(server_command)
    if env is not None and not isinstance(env, dict):  # [("K", "V")] or ["K=V"]
        env = dict(e.split("=", 1) if isinstance(e, str) else e for e in env)
    path = Path(file) if file else default_file()
    document = path.read_text(encoding="utf-8")
    plan = plan_typing(document, pauses=pauses, seed=seed, speed=speed)
    command = list(server_command) if server_command else default_server_command()
    server_env = server_environment(env, default_command=not server_command)

    trap = LogTrap()
    pygls_logger = logging.getLogger("pygls")
    old_propagate = pygls_logger.propagate
    pygls_logger.addHandler(trap)
    pygls_logger.propagate = False
    try:
        return await _Demo(
            path,
            plan,
            command,
            server_env,
            seed,
            speed,
            request_timeout,
            json_out,
            Reporter(stream),
            trap,
            requested_pauses=pauses,
        ).run()
    finally:
        pygls_logger.removeHandler(trap)
        pygls_logger.propagate = old_propagate


class _Demo:
    """One demo run; ``run()`` returns the summary dict."""

    def __init__(
        self,
        path: Path,
        plan: TypingPlan,
        command: list[str],
        env: dict[str, str],
        seed: int,
        speed: float,
        request_timeout: float,
        json_out: str | None,
        reporter: Reporter,
        trap: LogTrap,
        requested_pauses: int = 0,
    ) -> None:
        self.requested_pauses = requested_pauses
        self.path, self.plan, self.command, self.env = path, plan, command, env
        self.seed, self.speed, self.timeout, self.json_out = seed, speed, request_timeout, json_out
        self.out = reporter
        self.trap = trap
        self.session = ServerSession(
            on_message=self._on_message, on_update=self._on_update, on_log=self._on_log, on_status=self._on_status
        )
        #: The last ``sidecar/status`` payload (its ``model`` names the model answering).
        self.status: dict[str, Any] | None = None
        self.watch: _Watch | None = None
        self.messages: list[dict[str, str]] = []
        #: showMessage errors/warnings and the relevant logMessage texts, in arrival order.
        self.notices: list[dict[str, Any]] = []
        self.stray_updates = 0
        self.requests: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.cold: dict[str, Any] = {"ms": None, "ok": False}
        self.keys_sent = 0
        self.started = time.perf_counter()
        self._last_status = ""

    # -- notifications ------------------------------------------------------------

    def _on_message(self, kind: str, text: str) -> None:
        if kind == "status":
            if text == self._last_status:
                return  # repeated status: nothing new to say
            self._last_status = text
        if len(self.messages) < 100:
            self.messages.append({"kind": kind, "text": text})
        if kind in ("error", "warning"):
            self._notice(kind, text)
        self.out.server_message(kind, text)

    def _on_status(self, payload: Any) -> None:
        if isinstance(payload, dict):
            self.status = payload

    def _on_log(self, text: str) -> None:
        """``window/logMessage``: engine restarts and crashes are shown (once each) and kept."""
        if _RELEVANT_LOG.search(text) and self._notice("log", text):
            self.out.server_message("log", text)

    def _notice(self, kind: str, text: str) -> bool:
        """Keep a notice for the summary; a repeat only counts. True when it is new."""
        for n in self.notices:
            if n["kind"] == kind and n["text"] == text:
                n["count"] += 1
                return False
        if len(self.notices) < 100:
            self.notices.append({"kind": kind, "text": text, "count": 1})
        return True

    def _on_update(self, params: dict) -> None:
        w = self.watch
        pos = params.get("position") or {}
        if (
            w is None
            or params.get("uri") != w.uri
            or params.get("version", w.version) != w.version
            or pos.get("line", w.line) != w.line
            or pos.get("character", w.character) != w.character
        ):
            self.stray_updates += 1
            return
        w.updates += 1
        now_ms = (time.perf_counter() - w.started) * 1000.0
        if w.first_update_ms is None:
            w.first_update_ms = now_ms
        items = params.get("items") or []
        first = items[0] if items else {}
        text = first.get("insertText", "") if isinstance(first, dict) else ""
        if isinstance(text, dict):  # a snippet: {"kind": "snippet", "value": ...}
            text = text.get("value", "")
        w.text = text or ""
        if w.text.strip() and w.text_ms is None:
            w.text_ms = now_ms
        w.done = w.done or bool(params.get("done"))
        w.arrived.set()
        self.out.streaming(w.text, w.updates)

    async def _late_suggestion(self, watch: _Watch, until: float) -> str:
        """After an empty answer: the suggestion the server sent next for the same request
        as ``sidecar/inlineCompletionUpdate`` ("" if none), as an editor that renders
        updates would show it. The sidecar answers a request whose deadline
        (``request_timeout_ms``, 8 s by default) passes while the model is still loading
        with nothing and sends the suggestion as updates once it comes; on a slow machine
        that is a code model's first prompt. Waits for the update marked ``done``, at
        most until ``until`` (a ``time.perf_counter()`` time, the demo's own limit for
        the request), and only while one may come: an update came, or the server's
        ``sidecar.stats`` shows a stream still running."""
        while not watch.done:
            left = until - time.perf_counter()
            if left <= 0:
                break
            if not watch.updates:
                stats = await self.session.server_stats(timeout_s=min(5.0, left))
                runtime = (stats or {}).get("runtime") if isinstance(stats, dict) else None
                if not (isinstance(runtime, dict) and runtime.get("active_streams")):
                    await watch.next_update(min(0.3, left))  # one already on its way
                    if not watch.updates:
                        break  # nothing running: nothing more will come
                    continue
            await watch.next_update(min(1.0, until - time.perf_counter()))
        return watch.text if watch.text.strip() else ""

    # -- the run ------------------------------------------------------------------------

    async def run(self) -> dict:
        self.out.header(str(self.path), self._plan_info(), self.command)
        server_ok = False
        try:
            server_ok = await self._start()
            if server_ok:
                await self._type()
                self.server_stats = await self.session.server_stats()
        finally:
            await self.session.close()
        summary = self._summary(server_ok)
        if not server_ok or self.errors or (not summary["ok"] and not self.notices):
            self.out.stderr_tail(list(self.session.stderr_tail)[-15:])
        self.out.summary(summary)
        if self.json_out:
            try:
                out = Path(self.json_out)
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")  # noqa: ASYNC240 - once, at the end
                self.out.info(f"summary written to {out}")
            except OSError as exc:
                self.out.info(f"could not write {self.json_out}: {exc}")
        return summary

    async def _start(self) -> bool:
        root_uri = self.path.resolve().parent.as_uri()
        try:
            result = await self.session.start(self.command, self.env, root_uri, timeout_s=self.timeout)
        except TimeoutError:
            self.errors.append(f"the server did not answer initialize within {self.timeout:g} s")
        except Exception as exc:
            self.errors.append(f"could not start the server: {exc}")
        else:
            info = result.server_info
            name = f"{info.name} {info.version or ''}".strip() if info else "unnamed server"
            self.out.info(f"connected to {name} (position encoding {self.session.position_encoding})")
            if not self.session.has_inline_completion:
                self.out.info("warning: the server does not advertise inlineCompletionProvider")
            if self.session.position_encoding != "utf-16":
                self.out.info("warning: the server chose a position encoding other than utf-16")
            return True
        self.out.info(f"FAILED: {self.errors[-1]}")
        return False

    async def _type(self) -> None:
        plan, session, out = self.plan, self.session, self.out
        uri = self.path.resolve().as_uri()
        session.open(uri, language_id(self.path), plan.opened_text)

        first = plan.keystrokes[0] if plan.keystrokes else None
        line, character = (first.line, first.character) if first else (0, 0)
        out.waiting("waiting for the first answer (cold start)…")
        watch = self.watch = _Watch(uri, 1, line, character, time.perf_counter())
        late = ""
        try:
            answer = await session.inline_completion(
                line, character, types.InlineCompletionTriggerKind.Invoked, timeout_s=2 * self.timeout
            )
            if answer.answered and not _has_text(answer.items):
                late = await self._late_suggestion(watch, watch.started + 2 * self.timeout)
        finally:
            self.watch = None
        ghost = None
        if answer.answered and answer.items:
            before, _ = _cursor_line(session.text, first.offset if first else 0)
            ghost = ghost_text(answer.items[0], before, len(before))
        late_ms = round(watch.text_ms, 1) if late and watch.text_ms is not None else None
        if late:
            ghost = late
        self.cold = {"ms": round(answer.elapsed_ms, 1), "ok": answer.answered, "suggestion": ghost, "late_ms": late_ms}
        if not answer.answered:
            self.errors.append(f"cold start: {answer.error}")
        out.cold_start(answer.elapsed_ms, ghost, answer.error, late_ms=late_ms)

        total = plan.pause_count
        index = 0
        current: tuple[int, str] | None = None  # the unfinished line on screen
        for key in plan.keystrokes:
            await asyncio.sleep(key.delay_s)
            if not session.alive:
                self.errors.append(f"the server stopped during typing (exit code {session.returncode})")
                break
            try:
                version = session.insert(key.line, key.character, key.text, key.offset)
            except Exception as exc:
                self.errors.append(f"could not send a change: {exc}")
                break
            self.keys_sent += 1
            cursor = key.offset + len(key.text)
            if "\n" in key.text:
                done_before, _ = _cursor_line(session.text, key.offset)
                out.line_done(key.line + 1, done_before)
            before, after = _cursor_line(session.text, cursor)
            line_no = key.line + key.text.count("\n")
            out.typing(line_no + 1, before + after)
            current = (line_no + 1, before + after)
            if key.pause:
                index += 1
                await self._pause(index, total, key, version, line_no, before, after)
                out.typing(line_no + 1, before + after)
                await asyncio.sleep(key.look_s)
        if current is not None:
            out.line_done(*current)

    async def _pause(self, index, total, key, version, line_no, before, after) -> None:
        character = utf16_len(before)
        watch = self.watch = _Watch(self.session.uri or "", version, line_no, character, time.perf_counter())
        late = ""
        try:
            answer = await self.session.inline_completion(line_no, character, timeout_s=self.timeout)
            if answer.answered and not _has_text(answer.items):
                late = await self._late_suggestion(watch, watch.started + self.timeout)
        finally:
            self.watch = None
        late_ms = round(watch.text_ms, 1) if late and watch.text_ms is not None else None
        record: dict[str, Any] = {
            "index": index,
            "line": line_no + 1,
            "column": character + 1,
            "reason": key.reason,
            "version": version,
            "ms": round(answer.elapsed_ms, 1),
            "answered": answer.answered,
            "items": len(answer.items),
            "suggestion": None,
            "streamed_updates": watch.updates,
            "first_update_ms": None if watch.first_update_ms is None else round(watch.first_update_ms, 1),
            # An empty answer whose suggestion followed as updates: when its text came (ms).
            "late_ms": late_ms,
            "error": answer.error,
        }
        self.requests.append(record)
        if not answer.answered:
            self.errors.append(f"pause {index} at {line_no + 1}:{character + 1}: {answer.error}")
            self.out.failure(index, total, line_no + 1, character + 1, key.reason, answer.error or "")
            return
        ghost = ghost_text(answer.items[0], before, len(before)) if answer.items else ""
        record["suggestion"] = late or ghost
        record["raw"] = late or (item_text(answer.items[0]) if answer.items else None)
        self.out.suggestion(
            index,
            total,
            line_no + 1,
            character + 1,
            key.reason,
            before,
            after,
            late or ghost,
            answer.elapsed_ms,
            extra_items=max(len(answer.items) - 1, 0),
            updates=watch.updates,
            first_update_ms=watch.first_update_ms,
            late_ms=late_ms,
        )

    # -- figures --------------------------------------------------------------------------

    def _plan_info(self) -> dict[str, Any]:
        doc, region = self.plan.document, self.plan.region
        return {
            "first_line": doc.count("\n", 0, region.start) + 1,
            "last_line": doc.count("\n", 0, region.end) + 1,
            "typed_chars": region.end - region.start,
            "keystrokes": len(self.plan.keystrokes),
            "planned_pauses": self.plan.pause_count,
            "seed": self.seed,
            "speed": self.speed,
            "typing_time_s": round(self.plan.typing_time_s, 2),
        }

    def _summary(self, server_ok: bool) -> dict[str, Any]:
        answered = [r for r in self.requests if r["answered"]]
        non_empty = [r for r in answered if (r["suggestion"] or "").strip()]
        planned = self.plan.pause_count
        firsts = [r["first_update_ms"] for r in self.requests if r["first_update_ms"] is not None]
        all_answered = server_ok and self.cold["ok"] and len(answered) == planned and len(self.requests) == planned
        info = self.session.init_result.server_info if self.session.init_result else None
        status = self.status or {}
        model = status.get("model")
        unanswered = (len(self.requests) - len(answered)) + (1 if server_ok and not self.cold["ok"] else 0)
        verdict = judge(
            server_ok=server_ok,
            shown=len(non_empty),
            pauses=planned,
            requests_sent=len(self.requests),
            cold_shown=bool((self.cold.get("suggestion") or "").strip()),
            unanswered=unanswered,
            notices=self.notices,
            errors=self.errors,
        )
        return {
            "ok": verdict["ok"],
            "verdict": verdict["verdict"],
            "failure": verdict["failure"],
            "failure_reasons": verdict["reasons"],
            "likely_cause": verdict["cause"],
            "engine": verdict["engine"],
            "suggestions_shown": len(non_empty),
            # The model of the server's last sidecar/status (None: it sent none), and where it runs.
            "model": str(model) if model else None,
            "model_backend": backend_label(status) if status else None,
            "last_status": self.status,
            "file": str(self.path),
            "seed": self.seed,
            "speed": self.speed,
            "server_command": self.command,
            "server": {
                "started": server_ok,
                "name": info.name if info else None,
                "version": info.version if info else None,
                "inline_completion_provider": self.session.has_inline_completion,
                "position_encoding": self.session.position_encoding if server_ok else None,
            },
            "typing": {**self._plan_info(), "keystrokes_sent": self.keys_sent},
            "pauses": planned,
            "requested_pauses": self.requested_pauses,
            "planned_pauses": planned,
            "requests_sent": len(self.requests),
            "answered": len(answered),
            "non_empty": len(non_empty),
            "failed": len(self.requests) - len(answered),
            "all_answered": bool(all_answered),
            # A late suggestion (an empty answer, then updates) counts when its text came.
            "time_to_suggestion_ms": latency_stats([r["late_ms"] or r["ms"] for r in answered]),
            "late_suggestions": sum(1 for r in self.requests if r["late_ms"] is not None),
            "first_update_ms": latency_stats(firsts),
            "cold_start_ms": self.cold["ms"],
            "server_latency_ms": (getattr(self, "server_stats", None) or {}).get("latency_ms", {}),
            "cold_start_suggestion_ms": self.cold.get("late_ms") or self.cold["ms"],
            "cold_start_ok": self.cold["ok"],
            "cold_start_suggestion": self.cold.get("suggestion"),
            "streamed_updates": sum(r["streamed_updates"] for r in self.requests),
            "stray_updates": self.stray_updates,
            "server_messages": self.messages,
            "server_notices": self.notices,
            "log_messages": len(self.session.log_messages),
            "client_warnings": self.trap.messages,
            "errors": self.errors,
            "duration_s": round(time.perf_counter() - self.started, 2),
            "requests": self.requests,
        }
