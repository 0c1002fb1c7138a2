"""The demo's verdict tells the truth: exit status 0 only when suggestions were shown and
the engine did not crash (the rules alone; the demo itself against the real embedded
engine is tests/e2e/test_demo_run_e2e.py)."""

from __future__ import annotations

import pytest

from sidecar.tools.demo.runner import judge

pytestmark = pytest.mark.timeout(240)

CRASH = (
    "sidecar: the local engine crashed with SIGSEGV (signal 11) during warm-up; its log is /x/engine.log. Fix: rebuild"
)
GAVE_UP = (
    "sidecar: gave up on the local engine: it crashed during start-up 3 times in a row (the local engine "
    "crashed with SIGSEGV (signal 11) during warm-up; its log is /x/engine.log. Fix: rebuild)"
)


def _judge(**kw):
    args = dict(
        server_ok=True, shown=2, pauses=2, requests_sent=2, cold_shown=True, unanswered=0, notices=[], errors=[]
    )
    return judge(**{**args, **kw})


def test_verdict_rules():
    assert _judge()["ok"] and _judge()["verdict"] == "PASS"
    empty = _judge(shown=0)
    assert not empty["ok"] and empty["failure"] == "no suggestion was shown (0 of 2 pauses): every answer was empty"
    crashed = _judge(shown=0, notices=[{"kind": "log", "text": CRASH}, {"kind": "error", "text": GAVE_UP}])
    assert crashed["failure"].startswith("no suggestion was shown (0 of 2 pauses): gave up on the local engine")
    assert crashed["engine"] == {
        "died": True,
        "crashed": True,
        "signal": "SIGSEGV",
        "gave_up": True,
        "message": GAVE_UP.removeprefix("sidecar: "),
    }
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


# -- --tiny: the shipped SmolLM2 instead of the installed code model -------------------------


def _demo_args(*argv: str):
    import argparse

    from sidecar.tools.demo.cli import add_arguments

    return add_arguments(argparse.ArgumentParser()).parse_args(list(argv))


def test_tiny_pins_smollm2_unless_the_user_names_a_model():
    from sidecar.tools.demo.cli import demo_env

    assert demo_env(None) is None and demo_env([]) is None
    assert demo_env(None, tiny=True) == {"SIDECAR_LOCAL_MODEL": "smollm2-135m"}
    assert demo_env([("A", "1")], tiny=True) == {"A": "1", "SIDECAR_LOCAL_MODEL": "smollm2-135m"}
    assert demo_env([("A", "1")]) == {"A": "1"}  # no --tiny: the server's default (auto: the code model)
    # The user's own --env SIDECAR_LOCAL_MODEL wins over --tiny.
    assert demo_env([("SIDECAR_LOCAL_MODEL", "qwen2.5-coder-0.5b")], tiny=True) == {
        "SIDECAR_LOCAL_MODEL": "qwen2.5-coder-0.5b"
    }
    ns = _demo_args("--tiny", "--env", "X=y")
    assert ns.tiny and demo_env(ns.env, ns.tiny) == {"X": "y", "SIDECAR_LOCAL_MODEL": "smollm2-135m"}
    assert not _demo_args().tiny


def test_tiny_reaches_the_server_environment(monkeypatch):
    from sidecar.tools.demo import cli, runner

    seen: list[dict] = []

    async def fake_run_demo(**kw):
        seen.append(kw)
        return {"ok": True}

    monkeypatch.setattr(runner, "run_demo", fake_run_demo)
    assert cli.run_from_args(_demo_args("--tiny", "--pauses", "1")) == 0
    assert seen[-1]["env"] == {"SIDECAR_LOCAL_MODEL": "smollm2-135m"} and seen[-1]["pauses"] == 1
    assert cli.run_from_args(_demo_args("--tiny", "--env", "SIDECAR_LOCAL_MODEL=qwen2.5-coder-0.5b")) == 0
    assert seen[-1]["env"] == {"SIDECAR_LOCAL_MODEL": "qwen2.5-coder-0.5b"}
    assert cli.run_from_args(_demo_args()) == 0
    assert seen[-1]["env"] is None
    # The server gets it on top of os.environ (which may name another model).
    monkeypatch.setenv("SIDECAR_LOCAL_MODEL", "qwen2.5-coder-0.5b")
    env = runner.server_environment({"SIDECAR_LOCAL_MODEL": "smollm2-135m"}, default_command=True)
    assert env["SIDECAR_LOCAL_MODEL"] == "smollm2-135m"


async def test_run_demo_reads_tiny_from_a_namespace(monkeypatch):
    from sidecar.tools.demo import runner

    original = runner.run_demo
    seen: list[dict] = []

    async def fake_run_demo(**kw):
        seen.append(kw)
        return {"ok": True}

    monkeypatch.setattr(runner, "run_demo", fake_run_demo)  # the Namespace path calls it again
    await original(_demo_args("--tiny", "--env", "A=1"))
    assert seen[-1]["env"] == {"A": "1", "SIDECAR_LOCAL_MODEL": "smollm2-135m"}


# -- the summary names the model ------------------------------------------------------------


def _bare_summary(**over):
    stats = {"count": 1, "p50": 100.0, "p90": 100.0, "max": 100.0, "mean": 100.0}
    s = {
        "ok": True,
        "verdict": "PASS",
        "failure": None,
        "failure_reasons": [],
        "engine": {},
        "suggestions_shown": 1,
        "pauses": 1,
        "planned_pauses": 1,
        "answered": 1,
        "non_empty": 1,
        "all_answered": True,
        "time_to_suggestion_ms": stats,
        "first_update_ms": {"count": 0},
        "cold_start_ms": 900.0,
        "cold_start_suggestion_ms": 900.0,
        "server_latency_ms": {},
        "server_notices": [],
        "errors": [],
        "model": None,
        "model_backend": None,
        "last_status": None,
    }
    return {**s, **over}


def _printed(summary) -> str:
    import io

    from sidecar.tools.demo.report import Reporter

    out = io.StringIO()
    Reporter(out, fancy=False).summary(summary)
    return out.getvalue()


def test_summary_names_the_model():
    status = {
        "mode": "local",
        "side": "local",
        "backend": "local engine (llama-cpp-python)",
        "provider": "local",
        "model": "qwen2.5-coder-0.5b-instruct",
        "health": "ready",
    }
    text = _printed(
        _bare_summary(model="qwen2.5-coder-0.5b-instruct", model_backend="local engine", last_status=status)
    )
    assert "  model                qwen2.5-coder-0.5b-instruct (local engine)\n" in text
    assert "  model                unknown (the server sent no status)\n" in _printed(_bare_summary())
    assert "late suggestions" not in text and "(empty; the suggestion followed" not in text


def test_backend_label():
    from sidecar.tools.demo.report import backend_label

    assert backend_label({"side": "local", "backend": "local engine (llama-cpp-python)"}) == "local engine"
    assert backend_label({"side": "cloud", "backend": "SiliconFlow"}) == "cloud: SiliconFlow"
    assert (
        backend_label({"side": "local", "backend": "Ollama at http://127.0.0.1:11434"})
        == "Ollama at http://127.0.0.1:11434"
    )
    assert backend_label({}) is None


def _bare_demo(tmp_path):
    import io

    from sidecar.tools.demo.report import Reporter
    from sidecar.tools.demo.runner import LogTrap, _Demo
    from sidecar.tools.demo.typist import plan_typing

    path = tmp_path / "m.py"
    path.write_text("def f(x):\n    return x + 1\n\n\ndef g(y):\n    return y * 2\n", encoding="utf-8")
    plan = plan_typing(path.read_text(encoding="utf-8"), pauses=1, seed=0, speed=50)
    out = io.StringIO()
    return _Demo(path, plan, ["true"], {}, 0, 50.0, 5.0, None, Reporter(out, fancy=False), LogTrap()), out


async def test_the_last_status_gives_the_summary_its_model(tmp_path):
    demo, _ = _bare_demo(tmp_path)
    assert demo._summary(True)["model"] is None
    demo._on_status(
        {
            "side": "local",
            "backend": "local engine (llama-cpp-python)",
            "model": "SmolLM2-135M-Instruct",
            "health": "starting",
        }
    )
    demo._on_status(
        {
            "side": "local",
            "backend": "local engine (llama-cpp-python)",
            "model": "qwen2.5-coder-0.5b-instruct",
            "health": "ready",
        }
    )
    s = demo._summary(True)
    assert s["model"] == "qwen2.5-coder-0.5b-instruct" and s["model_backend"] == "local engine"
    assert s["last_status"]["health"] == "ready"


# -- an empty answer at the server's deadline, then the suggestion as updates ----------------


class _FakeSession:
    def __init__(self, active: int) -> None:
        self.active = active
        self.asked = 0

    async def server_stats(self, timeout_s: float = 5.0):
        self.asked += 1
        return {"runtime": {"active_streams": self.active}}


def _update(text: str, seq: int, done: bool) -> dict:
    return {
        "uri": "file:///m.py",
        "version": 3,
        "position": {"line": 1, "character": 4},
        "requestId": 1,
        "seq": seq,
        "items": [{"insertText": text}] if text else [],
        "done": done,
    }


async def test_a_late_suggestion_is_waited_for_and_shown(tmp_path):
    import asyncio
    import time

    from sidecar.tools.demo.runner import _Watch

    demo, _ = _bare_demo(tmp_path)
    demo.session = _FakeSession(active=1)
    watch = demo.watch = _Watch("file:///m.py", 3, 1, 4, time.perf_counter())
    loop = asyncio.get_running_loop()
    loop.call_later(0.05, demo._on_update, _update("return x", 1, False))
    loop.call_later(0.07, demo._on_update, _update("return x + 1", 2, False))
    loop.call_later(0.09, demo._on_update, _update("return x + 1", 3, True))
    text = await demo._late_suggestion(watch, time.perf_counter() + 5)
    assert text == "return x + 1" and watch.done and watch.updates == 3
    assert 40 <= watch.text_ms < 2000  # the first text's time, from the request
    assert demo.stray_updates == 0


async def test_no_running_stream_no_wait(tmp_path):
    import time

    from sidecar.tools.demo.runner import _Watch

    demo, _ = _bare_demo(tmp_path)
    demo.session = _FakeSession(active=0)
    watch = demo.watch = _Watch("file:///m.py", 3, 1, 4, time.perf_counter())
    t0 = time.perf_counter()
    assert await demo._late_suggestion(watch, t0 + 5) == ""
    assert time.perf_counter() - t0 < 1.5  # nothing running: no 5 s wait
    # A stream that runs but never sends anything: the demo's own limit ends the wait.
    demo.session = _FakeSession(active=1)
    t0 = time.perf_counter()
    assert await demo._late_suggestion(watch, t0 + 0.15) == ""
    assert 0.1 <= time.perf_counter() - t0 < 2


def test_a_late_pause_is_shown_with_its_time():
    import io

    from sidecar.tools.demo.report import Reporter

    out = io.StringIO()
    Reporter(out, fancy=False).suggestion(
        1,
        3,
        2,
        5,
        "end of line",
        "    ",
        "",
        "return x + 1",
        8003.0,
        updates=3,
        first_update_ms=11000.0,
        late_ms=11000.0,
    )
    text = out.getvalue()
    assert "11000 ms (the answer at 8003 ms was empty; the suggestion followed in 3 updates)" in text
    assert "    [return x + 1]" in text
    late = _printed(_bare_summary(cold_start_ms=8001.0, cold_start_suggestion_ms=14002.0, late_suggestions=1))
    assert "  cold start           8001 ms (empty; the suggestion followed after 14002 ms)" in late
    assert "  late suggestions     1 " in late
