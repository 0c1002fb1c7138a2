"""The stdio reader never goes deaf (sidecar/lsp/framing.py, stdio.py, messages.py): raw bytes into a real
``python -m sidecar serve``. After each kind of malformed frame the server answers the
next well-formed request, or, when the stream cannot be resynchronised, exits non-zero at
once; stdout holds nothing but well-formed frames. The framer alone is
tests/unit/test_framing.py."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from conftest import ROOT, sidecar_env
from support.framing import body, frame, stats

pytestmark = pytest.mark.timeout(60)


def parse_frames(data: bytes) -> tuple[list[dict], bytes]:
    """Every complete frame of ``data`` (strict: a stray byte fails) and the unfinished rest."""
    out, i = [], 0
    while i < len(data):
        end = data.find(b"\r\n\r\n", i)
        if end < 0:
            break
        lines = data[i:end].decode("ascii").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines)
        assert set(headers) <= {"Content-Length", "Content-Type"}, headers
        n = int(headers["Content-Length"])
        if end + 4 + n > len(data):
            break
        out.append(json.loads(data[end + 4 : end + 4 + n]))
        i = end + 4 + n
    return out, data[i:]


class Server:
    def __init__(self, tmp_path):
        env = sidecar_env(tmp_path, SIDECAR_BASE_URL="http://127.0.0.1:9/v1")  # nothing listens: no engine
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "sidecar", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=ROOT,
        )
        self.out = b""
        self.frames: list[dict] = []

    def send(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def answers(self) -> dict:
        ids = (int, str, type(None))
        return {m["id"]: m for m in self.frames if "method" not in m and isinstance(m.get("id", {}), ids)}

    def wait_for(self, want, timeout_s: float) -> bool:
        """Read stdout until ``want(frames)`` holds, the process exits, or the timeout."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while not want(self.frames) and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.05)[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return want(self.frames)
                self.out += chunk
                self.frames, _ = parse_frames(self.out)
        return want(self.frames)

    def initialize(self) -> None:
        self.send(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            )
        )
        assert self.wait_for(lambda f: 1 in {m.get("id") for m in f}, 30), self.proc.stderr.read1()
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def finish(self) -> str:
        """shutdown + exit; returns stderr. stdout must be only whole frames."""
        self.send(frame({"jsonrpc": "2.0", "id": 999, "method": "shutdown"}))
        assert self.wait_for(lambda f: 999 in self.answers(), 15)
        self.send(frame({"jsonrpc": "2.0", "method": "exit"}))
        rest, err = self.proc.communicate(timeout=15)
        self.frames, tail = parse_frames(self.out + rest)
        assert tail == b"", tail
        assert self.proc.returncode == 0, err.decode()[-2000:]
        return err.decode()


GOOD = 2  # the id of the well-formed request after the malformed bytes
NO_REPLY = object()

# kind -> (the malformed bytes, the error answer they get: (id, code) or NO_REPLY)
KINDS = {
    "non-numeric length": (b"Content-Length: abc\r\n\r\n" + body(stats(50)), NO_REPLY),
    "too-short length": (frame(stats(51), length=10), (None, -32700)),
    "too-long length": (frame(stats(52), length=len(body(stats(52))) + 200), NO_REPLY),
    "lowercase header name": (frame(stats(53), name=b"content-length"), NO_REPLY),
    "garbage line": (b"\x00\xffnot a header at all\r\n", NO_REPLY),
    "non-JSON body": (b"Content-Length: 9\r\n\r\nnot json!", (None, -32700)),
    "object id": (frame({"jsonrpc": "2.0", "id": {"x": 1}, "method": "shutdown"}), (None, -32600)),
    "array id": (frame({"jsonrpc": "2.0", "id": [7], "method": "shutdown"}), (None, -32600)),
    "no method": (frame({"jsonrpc": "2.0", "id": 903}), (903, -32600)),
}
# Frames whose own request is answered as well: their length only was wrong (too-long
# is cut at the end of the JSON value) or not wrong at all.
ALSO_ANSWERED = {"too-long length": 52, "lowercase header name": 53}


@pytest.mark.parametrize("kind", list(KINDS))
def test_malformed_frame_then_the_next_request_is_answered(tmp_path, kind):
    bad, reply = KINDS[kind]
    srv = Server(tmp_path)
    try:
        srv.initialize()
        srv.send(bad + frame(stats(GOOD)))
        answered = srv.wait_for(lambda f: GOOD in srv.answers(), 10)
        assert answered, f"alive={srv.proc.poll() is None} and silent after {kind}"
        assert "result" in srv.answers()[GOOD]
        if kind in ALSO_ANSWERED:
            assert srv.wait_for(lambda f: ALSO_ANSWERED[kind] in srv.answers(), 5)
        err = srv.finish()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
    errors = [m for m in srv.frames if "error" in m]
    if reply is NO_REPLY:
        assert not errors, errors
    else:
        (e,) = errors
        want_id, code = reply
        assert "id" in e and e["id"] == want_id and e["error"]["code"] == code, e
        assert "Traceback" not in json.dumps(e)
    # The reader logs from the stdin loop (stdio.py) and the message check (messages.py).
    logged = [ln for ln in err.splitlines() if any(f"sidecar.lsp.{m}" in ln for m in ("framing", "stdio", "messages"))]
    assert len(logged) == (0 if kind == "lowercase header name" else 1), logged


def test_every_kind_in_one_session(tmp_path):
    """The reader recovers again and again: all the kinds back to back, each followed by a
    request, in one process."""
    srv = Server(tmp_path)
    try:
        srv.initialize()
        ids = []
        for i, (bad, _reply) in enumerate(KINDS.values()):
            ids.append(100 + i)
            srv.send(bad + frame(stats(100 + i)))
        assert srv.wait_for(lambda f: set(ids) <= set(srv.answers()), 15), sorted(k for k in srv.answers() if k)
        srv.finish()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()


def test_a_stream_that_cannot_be_resynchronised_exits_non_zero(tmp_path):
    srv = Server(tmp_path)
    try:
        srv.initialize()
        junk = b"this is not LSP\n" * (2 * 1024 * 1024 // 16)  # 2 MiB without a header
        try:
            srv.send(junk)
        except BrokenPipeError:
            pass  # it already gave up
        t0 = time.monotonic()
        rest, err = srv.proc.communicate(timeout=10)
        took = time.monotonic() - t0
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
            srv.proc.wait()
    assert srv.proc.returncode not in (0, None)
    assert took < 1.0, took
    assert "lost the LSP framing" in err.decode()
    frames, tail = parse_frames(srv.out + rest)
    assert tail == b""


@pytest.mark.parametrize("line,character", [(-1, 0), (0, 2**40)], ids=["negative-line", "past-uinteger"])
def test_a_position_outside_the_lsp_types_is_invalid_params_and_one_warning(tmp_path, line, character):
    """Not a uinteger (LSP 3.17 §Position): -32602, one warning line on stderr, no ERROR
    and no traceback (the client's mistake, not the server's), and the next request is
    answered."""
    s = Server(tmp_path)
    s.initialize()
    s.send(
        frame(
            {
                "jsonrpc": "2.0",
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {"uri": "file:///w/p.py", "languageId": "python", "version": 1, "text": "x = 1\n"}
                },
            }
        )
    )
    s.send(
        frame(
            {
                "jsonrpc": "2.0",
                "id": 40,
                "method": "textDocument/inlineCompletion",
                "params": {
                    "textDocument": {"uri": "file:///w/p.py"},
                    "position": {"line": line, "character": character},
                    "context": {"triggerKind": 2},
                },
            }
        )
    )
    s.send(frame(stats(GOOD)))
    assert s.wait_for(lambda f: {40, GOOD} <= set(s.answers()), 30)
    err = s.finish()
    assert s.answers()[40]["error"]["code"] == -32602
    assert "result" in s.answers()[GOOD]
    assert "Traceback" not in err and " ERROR " not in err, err
    assert err.count("rejected a request (-32602)") == 1, err
