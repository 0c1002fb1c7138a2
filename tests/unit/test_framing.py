"""The stdio reader never goes deaf (sidecar/lsp/framing.py, messages.py): the framer alone, fed bytes
in process, and the envelope checks. Raw bytes into a real ``python -m sidecar serve``
are tests/e2e/test_framing_e2e.py."""

from __future__ import annotations

import json

import pytest

from sidecar.lsp.framing import Framer
from sidecar.lsp.messages import envelope_problem
from support.framing import body, frame, stats

pytestmark = pytest.mark.timeout(60)


def test_framer_byte_by_byte_with_crlf_free_headers():
    msg = body({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    data = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\nCONTENT-LENGTH:%d\n\n" % len(msg) + msg
    f, events = Framer(), []
    for b in data * 3:
        events += f.feed(bytes([b]))
    assert events == [("message", json.loads(msg))] * 3


def test_framer_takes_an_overlong_last_body_after_a_pause():
    f = Framer()
    assert f.feed(frame(stats(7), length=500)) == []
    events = f.stalled()
    assert [k for k, _ in events] == ["malformed", "message"] and events[1][1]["id"] == 7


def test_framer_splits_a_body_that_is_only_cut_off():
    f = Framer()
    half = frame(stats(8))
    assert f.feed(half[:-5]) == [] and f.stalled() == []  # a slow sender, not a bad length
    assert f.feed(half[-5:]) == [("message", stats(8))]


def test_envelope_problems():
    assert envelope_problem({"jsonrpc": "2.0", "id": 1, "method": "x"}) is None
    assert envelope_problem({"jsonrpc": "2.0", "method": "x"}) is None
    assert envelope_problem({"jsonrpc": "2.0", "id": 1, "result": None}) is None
    assert envelope_problem({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "m"}}) is None
    assert envelope_problem({"jsonrpc": "2.0", "id": True, "method": "x"})[:2] == (-32600, None)
    assert envelope_problem({"jsonrpc": "2.0", "id": 1.5, "method": "x"})[:2] == (-32600, None)
    assert envelope_problem({"jsonrpc": "2.0", "id": None, "method": "x"})[:2] == (-32600, None)
    assert envelope_problem({"jsonrpc": "2.0", "method": 1})[:2] == (-32600, None)
    assert envelope_problem({"jsonrpc": "1.0", "id": 4, "method": "x"})[:2] == (-32600, 4)
    assert envelope_problem({"id": 4, "method": "x"})[:2] == (-32600, 4)
    assert envelope_problem([{"jsonrpc": "2.0", "method": "x"}])[:2] == (-32600, None)
    assert envelope_problem({"jsonrpc": "2.0", "id": {"a": 1}, "result": 1})[0] is None  # never answer a response
