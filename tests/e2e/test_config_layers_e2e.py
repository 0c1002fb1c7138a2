"""Bad values in the settings layers, over real stdio (issue 33, items 5 and 6).

The rule (docs/configuration.md): a bad setting is reported in one message and only
that setting falls back (to the value of the layer below, or the default); the rest of
its layer and every other layer stand, the environment above all. Two settings that
contradict each other (``debounce_min_ms`` above ``debounce_max_ms``) are a bad pair:
the pair falls back, not the backend. And a rejected ``sidecar.setMode`` answers
-32602 with a clear message and logs one warning, never an ERROR with a traceback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar import config
from sidecar.completion import gate as G

pytestmark = pytest.mark.timeout(60)
KEY = "sk-layers-not-a-real-key-123456"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as s:
        s.set_responder(lambda body: "done()")
        yield s


def cloud_env(tmp_path, sim, **extra):
    """The backend in the environment: the simulator's base URL and a key (provider auto:
    an OpenAI-compatible server), and a JSON log file."""
    return sidecar_env(
        tmp_path,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_API_KEY=KEY,
        SIDECAR_LOG_FILE=str(tmp_path / "sidecar.jsonl"),
        **extra,
    )


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("/completions")]


async def cmd(client, name, *args):
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args))), 20
    )


async def serve_once(env, init_options=None, uri="file:///w/c.py"):
    """One session: a completion, the stats, the messages shown and the statuses."""
    async with sidecar(env, init_options=init_options) as client:
        open_doc(client, uri, "x = \n")
        answer = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 0, 4)), 20)
        stats = await cmd(client, "sidecar.stats")
        messages = [m.message for m in client.messages]
        statuses = list(client.sidecar_status)
    return answer, stats, messages, statuses


def assert_cloud_backend_kept(sim, answer, stats, statuses) -> None:
    """The environment's backend and key serve: the request reached the simulator with
    the key, and the status says cloud."""
    reqs = completions(sim)
    assert reqs, "no request reached the configured base URL"
    assert all(r.auth_present for r in reqs)
    assert answer is not None and answer.items[0].insert_text == "done()"
    assert stats["status"]["side"] == "cloud" and stats["status"]["mode"] == "cloud", stats["status"]
    assert statuses and all(s.get("side") == "cloud" for s in statuses if "side" in s)


def about(messages, *words):
    return [m for m in messages if all(w in m for w in words)]


# ------------------------------------------------------------------ item 5


async def test_a_contradiction_in_the_file_keeps_the_environments_backend(tmp_path, sim):
    (tmp_path / "config.toml").write_text("debounce_min_ms = 300\ndebounce_max_ms = 100\nmax_tokens = 17\n")
    answer, stats, messages, statuses = await serve_once(cloud_env(tmp_path, sim))
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    # The rest of the file's layer stands.
    assert completions(sim)[0].body["max_tokens"] == 17
    # One message, naming the pair and where it came from.
    assert len(messages) == 1, messages
    assert about(messages, "debounce_min_ms", "debounce_max_ms", "config file"), messages


async def test_a_contradiction_across_file_and_environment_drops_the_files_value(tmp_path, sim):
    (tmp_path / "config.toml").write_text('debounce_max_ms = 100\nmodel = "from-file"\n')
    answer, stats, messages, statuses = await serve_once(cloud_env(tmp_path, sim, SIDECAR_DEBOUNCE_MIN_MS="300"))
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert completions(sim)[0].body["model"] == "from-file"
    assert len(messages) == 1, messages
    # The environment's value stays; the file's, below it, falls back.
    assert about(messages, "debounce_max_ms", "config file"), messages
    assert not about(messages, "debounce_min_ms from the environment"), messages


async def test_a_contradiction_in_initialization_options_drops_only_the_pair(tmp_path, sim):
    (tmp_path / "config.toml").write_text("max_tokens = 17\n")
    init = {"sidecar": {"debounceMinMs": 300, "debounceMaxMs": 100, "maxTokens": 21}}
    answer, stats, messages, statuses = await serve_once(cloud_env(tmp_path, sim), init_options=init)
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert completions(sim)[0].body["max_tokens"] == 21  # the rest of initializationOptions stands
    assert len(messages) == 1 and about(messages, "debounce_min_ms", "initializationOptions"), messages


async def test_a_bad_environment_value_keeps_the_rest_of_the_environment(tmp_path, sim):
    answer, stats, messages, statuses = await serve_once(
        cloud_env(tmp_path, sim, SIDECAR_DEBOUNCE_MIN_MS="abc", SIDECAR_MAX_TOKENS="19")
    )
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert completions(sim)[0].body["max_tokens"] == 19
    assert len(messages) == 1 and about(messages, "SIDECAR_DEBOUNCE_MIN_MS", "'abc'", "integer"), messages


async def test_a_value_of_the_wrong_type_in_the_file_keeps_its_base_url(tmp_path, sim):
    (tmp_path / "config.toml").write_text(f'base_url = "{sim.base_url}"\nmax_tokens = "lots"\nmodel = "from-file"\n')
    env = sidecar_env(tmp_path, SIDECAR_API_KEY=KEY)  # the base URL only in the file
    answer, stats, messages, statuses = await serve_once(env)
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    body = completions(sim)[0].body
    assert body["model"] == "from-file" and body["max_tokens"] == config.Settings().max_tokens
    assert len(messages) == 1 and about(messages, "max_tokens", "'lots'", "config file"), messages


async def test_a_config_file_that_is_not_utf8_keeps_the_environment(tmp_path, sim):
    (tmp_path / "config.toml").write_bytes(b'model = "caf\xe9"\nmax_tokens = 17\n')
    answer, stats, messages, statuses = await serve_once(cloud_env(tmp_path, sim, SIDECAR_MODEL="from-env"))
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert completions(sim)[0].body["model"] == "from-env"
    assert len(messages) == 1 and about(messages, "cannot read config file", "utf-8"), messages


@pytest.mark.parametrize("where, why", [("file", "between 0 and 1"), ("env", "a finite number")])
async def test_a_gate_threshold_outside_0_to_1_falls_back_alone(tmp_path, sim, where, why):
    env = cloud_env(tmp_path, sim, SIDECAR_GATE="true")
    if where == "file":
        (tmp_path / "config.toml").write_text('gate_threshold = 1.5\nmodel = "from-file"\n')
    else:
        env.update(SIDECAR_GATE_THRESHOLD="nan", SIDECAR_MODEL="from-file")
    answer, stats, messages, statuses = await serve_once(env)
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert stats["gate"]["enabled"] is True and stats["gate"]["threshold"] == G.DEFAULT_THRESHOLD
    assert completions(sim)[0].body["model"] == "from-file"
    assert len(messages) == 1 and about(messages, "gate_threshold", why), messages


async def test_an_unknown_mode_in_the_file_keeps_the_rest(tmp_path, sim):
    (tmp_path / "config.toml").write_text('mode = "turbo"\nmax_tokens = 17\n')
    answer, stats, messages, statuses = await serve_once(cloud_env(tmp_path, sim))
    assert_cloud_backend_kept(sim, answer, stats, statuses)
    assert completions(sim)[0].body["max_tokens"] == 17
    assert len(messages) == 1 and about(messages, "mode", "'turbo'"), messages


# ------------------------------------------------------------------ item 6


def test_the_default_threshold_has_one_source():
    """``gate_threshold``'s default is the gate's fitted constant itself (no second
    literal), and docs/configuration.md and docs/benchmarks.md say that value."""
    from pathlib import Path

    field = {f.name: f for f in dataclasses.fields(config.Settings)}["gate_threshold"]
    assert field.default is G.DEFAULT_THRESHOLD
    assert config.Settings().gate_threshold == G.DEFAULT_THRESHOLD
    root = Path(__file__).resolve().parents[2]
    assert f"| {G.DEFAULT_THRESHOLD:g} |" in (root / "docs/configuration.md").read_text()
    assert f"threshold {G.DEFAULT_THRESHOLD:g})" in (root / "docs/benchmarks.md").read_text()
    settings_src = (root / "sidecar/config/settings.py").read_text()
    assert repr(G.DEFAULT_THRESHOLD) not in settings_src


def log_records(tmp_path):
    path = tmp_path / "sidecar.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("args", [["turbo"], [], [3], [None]], ids=["typo", "none", "number", "null"])
async def test_a_rejected_set_mode_is_invalid_params_and_no_server_error(tmp_path, sim, capfd, args):
    env = cloud_env(tmp_path, sim)
    async with sidecar(env) as client:
        with pytest.raises(JsonRpcException) as info:
            await cmd(client, "sidecar.setMode", *args)
        # Still serving, still on the environment's backend.
        open_doc(client, "file:///w/c.py", "x = \n")
        answer = await asyncio.wait_for(
            client.text_document_inline_completion_async(inline_params("file:///w/c.py", 0, 4)), 20
        )
        stats = await cmd(client, "sidecar.stats")
        messages = [m.message for m in client.messages]
    assert info.value.code == -32602
    assert "sidecar.setMode" in info.value.message and "'cloud', 'local' or 'auto'" in info.value.message
    assert answer is not None and stats["status"]["side"] == "cloud"
    assert messages == []  # a typo in a command is the caller's, not a popup for the user
    err = capfd.readouterr().err
    assert "Traceback" not in err, err
    assert " ERROR " not in err, err
    records = log_records(tmp_path)
    assert not [r for r in records if r["level"] in ("error", "critical") or "exc" in r], records
    warned = [r for r in records if r["level"] == "warning"]
    assert len(warned) <= 1 and all("sidecar.setMode" in r["msg"] for r in warned), warned
