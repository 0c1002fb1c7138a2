"""The demo's verdict tells the truth: exit status 0 only when suggestions were shown and
the engine did not crash (the rules alone; the demo itself against the real embedded
engine is tests/e2e/test_demo_run_e2e.py)."""

from __future__ import annotations

import pytest

from sidecar.tools.demo.runner import judge

pytestmark = pytest.mark.timeout(240)

CRASH = ("sidecar: the local engine crashed with SIGSEGV (signal 11) during warm-up; its log is /x/engine.log. "
         "Fix: rebuild")
GAVE_UP = ("sidecar: gave up on the local engine: it crashed during start-up 3 times in a row (the local engine "
           "crashed with SIGSEGV (signal 11) during warm-up; its log is /x/engine.log. Fix: rebuild)")


def _judge(**kw):
    args = dict(server_ok=True, shown=2, pauses=2, requests_sent=2, cold_shown=True, unanswered=0,
                notices=[], errors=[])
    return judge(**{**args, **kw})


def test_verdict_rules():
    assert _judge()["ok"] and _judge()["verdict"] == "PASS"
    empty = _judge(shown=0)
    assert not empty["ok"] and empty["failure"] == "no suggestion was shown (0 of 2 pauses): every answer was empty"
    crashed = _judge(shown=0, notices=[{"kind": "log", "text": CRASH}, {"kind": "error", "text": GAVE_UP}])
    assert crashed["failure"].startswith("no suggestion was shown (0 of 2 pauses): gave up on the local engine")
    assert crashed["engine"] == {"died": True, "crashed": True, "signal": "SIGSEGV", "gave_up": True,
                                 "message": GAVE_UP.removeprefix("sidecar: ")}
    assert len(crashed["reasons"]) == 1  # the cause is said once
    # Suggestions were shown, but the engine died on the way: still a failure.
    later = _judge(notices=[{"kind": "log", "text": CRASH}])
    assert not later["ok"] and later["failure"] == CRASH.removeprefix("sidecar: ")
    # A server error (a rejected key, say) fails the run; a warning does not.
    assert not _judge(notices=[{"kind": "error", "text": "sidecar: the key was rejected"}])["ok"]
    assert _judge(notices=[{"kind": "warning", "text": "sidecar: rate limited (RPM)"}])["ok"]
    unanswered = _judge(unanswered=1, errors=["pause 2 at 3:4: no answer within 60 s (request cancelled)"])
    assert not unanswered["ok"] and unanswered["failure"].startswith("1 request got no answer (pause 2")
    assert _judge(pauses=0, shown=0, requests_sent=0)["ok"]  # no pauses: the cold start counts
    assert not _judge(pauses=0, shown=0, requests_sent=0, cold_shown=False)["ok"]
    assert not _judge(server_ok=False, errors=["could not start the server: boom"])["ok"]
