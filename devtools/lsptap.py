"""A tap on an LSP stdio channel, for the real-editor tests.

    python devtools/lsptap.py --out TRACE.jsonl -- COMMAND [ARG ...]
    python devtools/lsptap.py --summary TRACE.jsonl

The first form runs COMMAND (the language server) as a child process and copies the
bytes between the editor and the server unchanged, in both directions (stderr is the
child's own, inherited); every JSON-RPC message it sees on the way is written to
TRACE.jsonl (appended: an editor that restarts the server adds a session), one JSON
object a line: a first record ``{"t": 0, "start": unix time in s, "cmd": [...]}``, then
``{"t": ms since that start (monotonic), "dir": "in" (editor to server) or "out" (server
to editor), "msg": the message}``. The bytes go on
before the record is written, so the tap adds no wait to the channel. The exit code is
the child's (a signal's number plus 128 when it was killed); SIGTERM and SIGINT are passed
on to it.

The second form prints :func:`summarize`: for each ``textDocument/inlineCompletion``
request what the editor asked (document, position, version, trigger kind) and what the
server answered (the items' text, ``null``, or the error), the cancellations, the
``sidecar/inlineCompletionUpdate`` notifications, the edits, the shown and accept reports,
with their times. The tests print it when a real editor did not show what they expected,
so a failure says whether the server answered, what, and when (docs/editors.md, "When a
real-editor test fails").

Standard library only, so that an editor can start it with any Python; it is a
development tool and never part of the product (the framing it reads is LSP's base
protocol: ``Content-Length`` headers, then a JSON body).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["Frames", "events", "read_trace", "summarize"]


class Frames:
    """Splits a byte stream into LSP messages (base protocol: headers, a blank line, a
    body of ``Content-Length`` bytes). ``feed(data)`` returns the messages completed by
    ``data``, each the decoded JSON value, or ``{"unparsed": text}`` for a body that is not
    JSON; bytes that are no frame are skipped up to the next ``Content-Length`` header."""

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[Any]:
        self._buf += data
        out: list[Any] = []
        while True:
            head_end = self._buf.find(b"\r\n\r\n")
            if head_end < 0:
                return out
            length = None
            for line in self._buf[:head_end].split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    try:
                        length = int(value.strip())
                    except ValueError:
                        length = None
            if length is None or length < 0:
                # Not a header: resynchronise at a Content-Length inside it, else after it.
                nxt = self._buf.find(b"Content-Length", 1, head_end)
                self._buf = self._buf[nxt:] if nxt > 0 else self._buf[head_end + 4 :]
                continue
            body_start = head_end + 4
            if len(self._buf) < body_start + length:
                return out
            body = self._buf[body_start : body_start + length]
            self._buf = self._buf[body_start + length :]
            try:
                out.append(json.loads(body))
            except ValueError:
                out.append({"unparsed": body.decode("utf-8", "replace")[:2000]})


class _Trace:
    """The JSON-lines file, written by both pumps (one lock, a flush per record so that a
    killed tap leaves every record it took)."""

    def __init__(self, path: Path, cmd: list[str]) -> None:
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self._file = open(path, "a", encoding="utf-8")  # appended: one trace per test, each server start in it
        self._write({"t": 0, "start": round(time.time(), 3), "cmd": cmd})

    def _write(self, rec: dict[str, Any]) -> None:
        with self._lock:
            self._file.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self._file.flush()

    def message(self, direction: str, msg: Any) -> None:
        self._write({"t": round((time.monotonic() - self._t0) * 1000, 1), "dir": direction, "msg": msg})

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _pump(src: int, dst: int, direction: str, trace: _Trace, at_eof: Callable[[], None] | None) -> None:
    """Copy file descriptor ``src`` to ``dst`` until EOF, recording each message after it
    went on; then ``at_eof()`` (closing the server's stdin, so that it sees the editor's
    EOF)."""
    frames = Frames()
    while True:
        try:
            data = os.read(src, 65536)
        except OSError:
            data = b""
        if not data:
            break
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(dst, view) :]
        except OSError:
            break
        try:
            for msg in frames.feed(data):
                trace.message(direction, msg)
        except Exception as exc:  # a record that cannot be written must not stop the channel
            print(f"lsptap: cannot record a message: {exc}", file=sys.stderr)
    if at_eof is not None:
        try:
            at_eof()
        except OSError:
            pass


def run(out: Path, cmd: list[str]) -> int:
    """Run ``cmd`` behind the tap (module doc); returns its exit code."""
    trace = _Trace(out, cmd)
    try:
        child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    except OSError as exc:
        print(f"lsptap: cannot start {cmd[0]}: {exc}", file=sys.stderr)
        return 127
    assert child.stdin is not None and child.stdout is not None

    def forward(signum: int, _frame: Any) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    to_server = threading.Thread(
        target=_pump, args=(sys.stdin.fileno(), child.stdin.fileno(), "in", trace, child.stdin.close), daemon=True
    )
    to_editor = threading.Thread(
        target=_pump, args=(child.stdout.fileno(), sys.stdout.fileno(), "out", trace, None), daemon=True
    )
    to_server.start()
    to_editor.start()
    rc = child.wait()
    to_editor.join(5)
    trace.close()
    return rc if rc >= 0 else 128 - rc


# ---------------------------------------------------------------------------- the summary


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The records of a trace file (a torn last line, from a killed tap, is left out)."""
    out = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def _short(text: Any, limit: int = 70) -> str:
    s = json.dumps(text, ensure_ascii=False)
    return s if len(s) <= limit else s[: limit - 4] + '..."'


def _where(params: dict[str, Any]) -> str:
    uri = str((params.get("textDocument") or {}).get("uri") or params.get("uri") or "?")
    pos = params.get("position") or {}
    return f"{uri.rsplit('/', 1)[-1]}:{pos.get('line', '?')}:{pos.get('character', '?')}"


def _items_text(result: Any) -> str:
    if result is None:
        return "null"
    items = result.get("items") if isinstance(result, dict) else result
    if not isinstance(items, list):
        return _short(result)
    if not items:
        return "no items"
    texts = []
    for it in items:
        ins = it.get("insertText") if isinstance(it, dict) else None
        texts.append(ins.get("value") if isinstance(ins, dict) else ins)
    more = f" (+{len(items) - 1} more)" if len(items) > 1 else ""
    return _short(texts[0]) + more


def _change(params: dict[str, Any]) -> str:
    doc = params.get("textDocument") or {}
    parts = []
    for ch in params.get("contentChanges") or []:
        r = ch.get("range")
        if r is None:
            parts.append(f"whole text ({len(ch.get('text', ''))} chars)")
        else:
            s, e = r.get("start", {}), r.get("end", {})
            at = f"{s.get('line')}:{s.get('character')}"
            if (s.get("line"), s.get("character")) != (e.get("line"), e.get("character")):
                at += f"-{e.get('line')}:{e.get('character')}"
            parts.append(f"{at} {_short(ch.get('text', ''), 40)}")
    return f"v{doc.get('version', '?')} " + ", ".join(parts)


def events(records: list[dict[str, Any]]) -> list[tuple[float, str]]:
    """The channel's notable messages as ``(unix time in ms, one line)``, in order: a line
    per server start, inline completion requests and their answers (text, ``null``, error,
    or "NEVER ANSWERED"), cancellations, update notifications, edits, shown and accept
    reports, messages to the user, and the server's warnings and errors (a trace file may
    hold several server starts: the tap appends)."""
    out: list[tuple[float, str]] = []
    base = 0.0
    asked: dict[Any, float] = {}
    answered: set[Any] = set()
    methods: dict[Any, str] = {}
    log_messages = 0

    cancelled: set[Any] = set()
    last_t = 0.0

    def close_session() -> None:
        nonlocal log_messages
        for key, name in methods.items():
            if name == "textDocument/inlineCompletion" and key not in answered:
                why = "cancelled by the editor, " if key in cancelled else ""
                out.append(
                    (
                        base + asked[key],
                        f"   #{key[1]} inlineCompletion: NEVER ANSWERED ({why}the channel's last message "
                        f"{last_t - asked[key]:.0f} ms later)",
                    )
                )
        if log_messages:
            out.append((out[-1][0] if out else base, f"   ({log_messages} window/logMessage records)"))
        asked.clear()
        answered.clear()
        methods.clear()
        cancelled.clear()
        log_messages = 0

    for rec in records:
        if "start" in rec:
            close_session()
            last_t = 0.0
            base = float(rec.get("start") or 0.0) * 1000
            out.append((base, f"server started: {' '.join(map(str, rec.get('cmd') or []))}"))
            continue
        msg, t, d = rec.get("msg"), float(rec.get("t", 0.0)), rec.get("dir")
        if not isinstance(msg, dict):
            continue
        last_t = t
        head = "-> " if d == "in" else "<- "
        when = base + t
        method, mid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if not isinstance(params, dict):
            params = {}
        if method is None and mid is not None:  # a response
            key = ("in" if d == "out" else "out", mid)
            name = methods.get(key, "?")
            answered.add(key)
            if name == "textDocument/inlineCompletion":
                took = t - asked.get(key, t)
                what = f"ERROR {_short(msg['error'])}" if "error" in msg else _items_text(msg.get("result"))
                out.append((when, f"{head}#{mid} answer after {took:.0f} ms: {what}"))
            elif "error" in msg:
                out.append((when, f"{head}#{mid} {name} ERROR {_short(msg['error'])}"))
            continue
        if mid is not None:
            methods[(d, mid)] = str(method)
            asked[(d, mid)] = t
        line = None
        if method == "textDocument/inlineCompletion":
            ctx = params.get("context") or {}
            line = f"#{mid} inlineCompletion {_where(params)} trigger={ctx.get('triggerKind', '?')}"
        elif method == "$/cancelRequest":
            cancelled.add((d, params.get("id")))
            line = f"cancel #{params.get('id')}"
        elif method == "sidecar/inlineCompletionUpdate":
            line = (
                f"update of request {params.get('requestId')} seq={params.get('seq')} done={params.get('done')} "
                f"{_where(params)} v{params.get('version')}: {_items_text(params)}"
            )
        elif method == "textDocument/didChange":
            line = f"didChange {_change(params)}"
        elif method == "textDocument/didOpen":
            doc = params.get("textDocument") or {}
            line = f"didOpen {str(doc.get('uri', '?')).rsplit('/', 1)[-1]} v{doc.get('version')}"
        elif method == "workspace/executeCommand":
            line = f"#{mid} command {params.get('command')} {_short(params.get('arguments'))}"
        elif method == "window/logMessage":
            log_messages += 1
            if params.get("type") in (1, 2):
                level = "error" if params.get("type") == 1 else "warning"
                line = f"log ({level}) {_short(params.get('message'), 200)}"
        elif method in ("window/showMessage", "sidecar/didShowCompletion", "initialize", "shutdown", "exit"):
            line = f"{method} {_short(params, 120) if params else ''}".rstrip()
        if line is not None:
            out.append((when, head + line))
    close_session()
    return out


def summarize(records: list[dict[str, Any]], extra: list[tuple[float, str]] | None = None) -> str:
    """:func:`events` as text, one line each, merged in time with ``extra`` (``(unix time in
    ms, line)``, e.g. what the editor showed) and timed in ms from the first server start."""
    merged = sorted([*events(records), *(extra or [])], key=lambda e: e[0])
    if not merged:
        return "(the trace holds no messages)"
    starts = [w for w, text in merged if text.startswith("server started")]
    t0 = starts[0] if starts else merged[0][0]
    return "\n".join(f"{w - t0:9.0f} ms  {text}" for w, text in merged)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cmd: list[str] = []
    if "--" in args:
        i = args.index("--")
        args, cmd = args[:i], args[i + 1 :]
    p = argparse.ArgumentParser(prog="lsptap", description="Record an LSP stdio channel (module doc).")
    p.add_argument("--out", type=Path, help="trace file to write (JSON lines)")
    p.add_argument("--summary", type=Path, help="print the summary of a trace file")
    ns = p.parse_args(args)
    if ns.summary is not None:
        if not ns.summary.is_file():
            print(f"lsptap: no trace file {ns.summary}", file=sys.stderr)
            return 2
        print(summarize(read_trace(ns.summary)))
        return 0
    if ns.out is None or not cmd:
        print("lsptap: give --out TRACE.jsonl -- COMMAND [ARG ...], or --summary TRACE.jsonl", file=sys.stderr)
        return 2
    return run(ns.out, cmd)


if __name__ == "__main__":
    sys.exit(main())
