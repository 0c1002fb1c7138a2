"""``python -m devtools.bench``'s command line, in process: the refusal to reach SiliconFlow without
a key (or without being asked), option checks, the real backend's environment and
figures, and plots skipped without matplotlib. Nothing here contacts any backend; the
real ``python -m devtools.bench`` process is tests/e2e/test_bench_cli_e2e.py."""

from __future__ import annotations

import sys

import pytest

from devtools.bench.cli import NO_KEY_MESSAGE, main, write_plots
from devtools.bench.replay import ModeRun, RunOptions
from devtools.bench.report import build_timeline, compare, format_table, summarize
from sidecar import config

pytestmark = pytest.mark.timeout(60)


def test_refusal_comes_before_any_other_check(monkeypatch, capsys):
    monkeypatch.delenv("SILICONFLOW_API_KEY", raising=False)
    assert main(["--backend", "siliconflow", "--files", "/no/such/file", "--keystrokes", "0"]) == 2
    assert capsys.readouterr().err.strip() == NO_KEY_MESSAGE


def test_simulator_options_do_not_apply_to_siliconflow(monkeypatch, capsys):
    monkeypatch.setenv("SILICONFLOW_API_KEY", "sk-test-not-a-key")
    monkeypatch.setattr("devtools.bench.cli.run_bench", _must_not_run)
    assert main(["--backend", "siliconflow", "--ttft-ms", "100"]) == 2
    assert "--ttft-ms" in capsys.readouterr().err
    assert main(["--backend", "siliconflow", "--wrong-rate", "0"]) == 2
    assert "--wrong-rate" in capsys.readouterr().err


async def _must_not_run(*_a, **_k):
    raise AssertionError("the bench must not run")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["--timeline-mode", "naive", "--modes", "sidecar"], "--timeline-mode"),
        (["--timeline-file", "3"], "--timeline-file"),
        (["--keystrokes", "0"], "--keystrokes"),
        (["--set", "novalue"], "--set"),
    ],
)
def test_bad_options_exit_2(monkeypatch, capsys, argv, needle):
    monkeypatch.setattr("devtools.bench.cli.run_bench", _must_not_run)
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


def test_simulated_runs_never_pass_the_users_key(monkeypatch, tmp_path):
    monkeypatch.setenv("SILICONFLOW_API_KEY", "sk-user-secret")
    monkeypatch.setenv("SIDECAR_BASE_URL", "https://api.siliconflow.cn/v1")
    monkeypatch.setenv("SIDECAR_PROVIDER", "openai")
    run = ModeRun("sidecar", [], RunOptions(), tmp_path)
    env = run._server_env("http://127.0.0.1:9/v1")
    assert env["SILICONFLOW_API_KEY"] == "sk-bench"
    assert env["SIDECAR_BASE_URL"] == "http://127.0.0.1:9/v1"
    # The bench names the simulator's provider itself; the user's SIDECAR_PROVIDER never passes.
    assert env["SIDECAR_PROVIDER"] == "siliconflow"
    assert "sk-user-secret" not in env.values()
    s = config.build(config.from_env(env))
    assert s.cloud_provider == "siliconflow" and s.resolved_base_url == "http://127.0.0.1:9/v1"
    # A --set provider=... in the bench's config file is left to decide.
    run = ModeRun("sidecar", [], RunOptions(settings={"provider": "openai"}), tmp_path / "set")
    assert "SIDECAR_PROVIDER" not in run._server_env("http://127.0.0.1:9/v1")
    assert "sk-user-secret" not in env.values()


def test_siliconflow_runs_keep_the_users_key_and_base_url_only(monkeypatch, tmp_path):
    monkeypatch.setenv("SILICONFLOW_API_KEY", "sk-user")
    monkeypatch.setenv("SIDECAR_BASE_URL", "https://api.siliconflow.com/v1")
    monkeypatch.setenv("SIDECAR_MODEL", "Qwen/Qwen2.5-Coder-32B-Instruct")
    monkeypatch.setenv("SIDECAR_MODE", "local")  # the user's, not the bench's
    monkeypatch.setenv("SIDECAR_LOCAL_URL", "http://127.0.0.1:8080")
    run = ModeRun("naive", [], RunOptions(backend="siliconflow"), tmp_path)
    env = run._server_env(None)
    assert env["SILICONFLOW_API_KEY"] == "sk-user"
    assert env["SIDECAR_BASE_URL"] == "https://api.siliconflow.com/v1"
    assert env["SIDECAR_MODEL"] == "Qwen/Qwen2.5-Coder-32B-Instruct"
    assert (env["SIDECAR_PROVIDER"], env["SIDECAR_MODE"]) == ("siliconflow", "cloud")
    assert env["SIDECAR_SCHEDULING"] == "naive" and env["SIDECAR_CACHE"] == "false"
    assert "SIDECAR_LOCAL_URL" not in env
    monkeypatch.delenv("SILICONFLOW_API_KEY")
    with pytest.raises(ValueError, match="SILICONFLOW_API_KEY"):
        ModeRun("naive", [], RunOptions(backend="siliconflow"), tmp_path)


def _real_raw(mode, prefetch, counters):
    return {
        "mode": mode,
        "backend": "siliconflow",
        "prefetch": prefetch,
        "pauses": [],
        "upstream": [],
        "keystrokes": 50,
        "keys_typed": 50,
        "accepts": 0,
        "accepted_chars": 0,
        "wall_s": 1.0,
        "errors": [],
        "lsp": {
            "inline_sent": 50,
            "inline_answered": 50,
            "commands_sent": 0,
            "commands_answered": 0,
            "non_empty_answers": 3,
        },
        "key_lateness_ms": {"count": 50, "mean": 1.0, "max": 2.0},
        "after_accept": [],
        "server_stats": {"counters": counters, "prefetch": {}},
        "file_windows": [
            {
                "file": "a.py",
                "path": "/a.py",
                "uri": "file:///a.py",
                "opened_s": 1.0,
                "first_key_s": 2.0,
                "closed_s": 9.0,
            }
        ],
        "keys": [
            {
                "t": 2.0,
                "file": "a.py",
                "kind": "key",
                "chars": 1,
                "text": None,
                "pause": None,
                "pause_from": None,
                "request_id": "x-1",
            }
        ],
        "requests": [
            {
                "id": "x-1",
                "kind": "inline",
                "uri": "file:///a.py",
                "version": 2,
                "sent_s": 2.0,
                "answered_s": 2.5,
                "latency_ms": 500.0,
                "text": "foo",
                "error": None,
                "cancel_sent": False,
                "current": True,
            }
        ],
    }


def test_real_backend_rows_come_from_the_server_or_show_a_dash():
    on = _real_raw("sidecar", True, {"upstream.requests": 10, "upstream.cancelled": 2, "upstream.closed_early": 1})
    off = _real_raw("sidecar-noprefetch", False, {"upstream.requests": 8})
    s = compare({"sidecar": summarize(on), "sidecar-noprefetch": summarize(off)})
    assert s["sidecar"]["upstream_requests"] == 10 and s["sidecar"]["upstream_aborted"] == 3
    assert s["sidecar"]["upstream_per_100_keys"] == 20.0
    assert s["sidecar"]["tokens_generated"] is None and s["sidecar"]["tokens_vs_noprefetch"] is None
    table = format_table(s)
    line = lambda label: next(x for x in table.splitlines() if x.startswith(label))  # noqa: E731
    assert line("tokens generated per accepted character").split()[-2:] == ["-", "-"]
    assert line("tokens generated vs no-prefetch").split()[-2:] == ["-", "-"]
    assert "3 (30%)" in line("upstream streams aborted")
    # A server that counts tokens fills the token rows.
    on["server_stats"]["counters"]["tokens.generated"] = 120
    on["accepted_chars"] = 60
    assert summarize(on)["tokens_per_accepted_char"] == 2.0
    # No stats at all (the server died): every upstream row is a dash, none is a zero.
    dead = summarize({**off, "server_stats": None})
    assert dead["upstream_requests"] is None and dead["upstream_aborted"] is None
    assert format_table({"x": dead}).count(" -") >= 5
    # The timeline still has the keys and suggestions, and says there are no upstream records.
    tl = build_timeline(on, 0)
    assert tl["upstream_recorded"] is False
    assert [e["type"] for e in tl["events"]] == ["key", "request", "suggestion"]
    assert tl["events"][0]["t"] == 1.0


def test_plots_are_skipped_without_matplotlib(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    cdf, tl, note = write_plots(tmp_path, {}, None, "t")
    assert (cdf, tl) == (None, None) and "matplotlib is not installed" in note
    assert not any(tmp_path.iterdir())
