"""devtools/lsptap.py, the tap the real-editor tests put between the editor and the server:
bytes pass unchanged both ways, every message is recorded, and the summary says what was
asked and answered (and what never was)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from devtools.lsptap import Frames, events, read_trace, summarize

ROOT = Path(__file__).resolve().parents[2]
TAP = ROOT / "devtools" / "lsptap.py"


def frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_frames_split_anywhere_and_resynchronise():
    data = frame({"id": 1, "method": "a"}) + b"garbage\r\n\r\n" + frame({"id": 2, "result": "\u00e9"})
    data += b"Content-Length: 5\r\n\r\nnot j" + b"noise" + frame({"id": 3})
    for cut in range(1, len(data)):
        f = Frames()
        got = f.feed(data[:cut]) + f.feed(data[cut:])
        assert got == [{"id": 1, "method": "a"}, {"id": 2, "result": "\u00e9"}, {"unparsed": "not j"}, {"id": 3}], cut


# A server that answers one request and then says something of its own.
ECHO = r"""
import json, sys
def read():
    n = None
    while True:
        line = sys.stdin.buffer.readline()
        if line in (b"\r\n", b""):
            break
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return json.loads(sys.stdin.buffer.read(n))
def send(obj):
    body = json.dumps(obj).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()
req = read()
send({"jsonrpc": "2.0", "id": req["id"], "result": {"items": [{"insertText": "x = 1\n"}]}})
send({"jsonrpc": "2.0", "method": "window/logMessage", "params": {"type": 2, "message": "careful"}})
sys.exit(3)
"""


def test_the_tap_passes_bytes_unchanged_and_records_both_ways(tmp_path):
    trace = tmp_path / "t.jsonl"
    child = tmp_path / "echo.py"
    child.write_text(ECHO)
    req = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "textDocument/inlineCompletion",
        "params": {"textDocument": {"uri": "file:///w/a.py"}, "position": {"line": 1, "character": 4}},
    }
    proc = subprocess.run(
        [sys.executable, str(TAP), "--out", str(trace), "--", sys.executable, str(child)],
        input=frame(req),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 3, proc.stderr  # the server's own exit code
    f = Frames()
    got = f.feed(proc.stdout)
    assert got[0] == {"jsonrpc": "2.0", "id": 7, "result": {"items": [{"insertText": "x = 1\n"}]}}
    assert got[1]["method"] == "window/logMessage"
    recs = read_trace(trace)
    assert "start" in recs[0]
    assert [(r["dir"], r["msg"].get("id"), r["msg"].get("method")) for r in recs[1:]] == [
        ("in", 7, "textDocument/inlineCompletion"),
        ("out", 7, None),
        ("out", None, "window/logMessage"),
    ]
    text = summarize(recs)
    assert "#7 inlineCompletion a.py:1:4" in text
    assert "#7 answer after" in text and '"x = 1\\n"' in text
    assert "log (warning)" in text and "careful" in text


def test_summary_names_requests_never_answered_and_merges_editor_events():
    recs = [
        {"t": 0, "start": 1000.0, "cmd": ["sidecar"]},
        {"t": 10, "dir": "in", "msg": {"id": 1, "method": "textDocument/inlineCompletion", "params": {}}},
        {"t": 12, "dir": "in", "msg": {"method": "$/cancelRequest", "params": {"id": 1}}},
        {"t": 20, "dir": "in", "msg": {"id": 2, "method": "textDocument/inlineCompletion", "params": {}}},
        {"t": 30, "dir": "out", "msg": {"id": 1, "error": {"code": -32800, "message": "canceled"}}},
        {
            "t": 40,
            "dir": "out",
            "msg": {
                "method": "sidecar/inlineCompletionUpdate",
                "params": {"requestId": 2, "seq": 1, "done": True, "items": [{"insertText": "ab"}]},
            },
        },
    ]
    lines = summarize(recs, [(1_000_015.0, "   editor: shows nothing")]).splitlines()
    assert lines[0].strip().startswith("0 ms  server started")
    assert any("cancel #1" in ln for ln in lines)
    assert any("#1 answer after 20 ms: ERROR" in ln for ln in lines)
    assert any("update of request 2 seq=1 done=True" in ln and '"ab"' in ln for ln in lines)
    assert any("#2 inlineCompletion: NEVER ANSWERED" in ln for ln in lines)
    # The editor's event sits between the cancel (12 ms) and the second request (20 ms).
    at = [i for i, ln in enumerate(lines) if "editor: shows nothing" in ln][0]
    assert "cancel #1" in lines[at - 1] and "#2 inlineCompletion" in lines[at + 1]
    assert len(events(recs)) == len(lines) - 1


def test_a_second_server_start_in_one_file_is_its_own_session():
    recs = [
        {"t": 0, "start": 1.0, "cmd": ["a"]},
        {"t": 5, "dir": "in", "msg": {"id": 1, "method": "textDocument/inlineCompletion", "params": {}}},
        {"t": 0, "start": 2.0, "cmd": ["b"]},
        {"t": 5, "dir": "in", "msg": {"id": 1, "method": "textDocument/inlineCompletion", "params": {}}},
        {"t": 9, "dir": "out", "msg": {"id": 1, "result": None}},
    ]
    text = summarize(recs)
    assert text.count("server started") == 2
    assert text.count("NEVER ANSWERED") == 1  # the first server's request; the second was answered
    assert "answer after 4 ms: null" in text
