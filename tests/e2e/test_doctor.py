"""`sidecar doctor` as a real process against the simulated SiliconFlow backend on loopback:
each injected fault shows up in the report with the right status and advice, and the API
key never appears in the output. The engine check runs the real managed engine: a healthy
one is timed, a crashing one (SIGSEGV, as on CPUs with Intel AMX) fails the report."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from pathlib import Path

import pytest

from conftest import run_module
from devtools.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)

KEY = "sk-doctor-test-KEY"
CLOUD_CHECKS = ("config", "network", "key", "fim", "ttft")
ALL_CHECKS = {"config", "exclusion", "network", "key", "fim", "ttft", "local_engine", "gpu", "engine", "cache"}
FIM_REFUSED = {"code": 20015, "message": "The parameter is invalid: suffix", "data": None}


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1), api_key=KEY) as s:
        yield s


def doctor_env(tmp_path: Path, **env: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_"))}
    base.update(
        SIDECAR_CONFIG=str(tmp_path / "none.toml"),
        XDG_CACHE_HOME=str(tmp_path),
        XDG_STATE_HOME=str(tmp_path / "state"),
        SIDECAR_LOCAL_MODEL="smollm2-135m",  # not an installed code model: fast and the same everywhere
    )
    base.update(env)
    return base


def cloud_env(tmp_path: Path, sim: SimulatedBackend, **env: str) -> dict[str, str]:
    """SiliconFlow played by the simulator: a loopback URL is not a SiliconFlow host, so
    the provider is named (``SIDECAR_PROVIDER`` in ``env`` overrides it)."""
    return doctor_env(
        tmp_path,
        **{"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": sim.base_url, "SIDECAR_PROVIDER": "siliconflow", **env},
    )


async def run_doctor(env: dict[str, str], *args: str, timeout: float = 40, engine: bool = False) -> tuple[int, str]:
    """Run ``python -m sidecar.tools.doctor`` without blocking the loop the simulator runs on;
    returns (exit code, stdout). Fails if any piece of the key shows up in its output.
    Without ``engine`` it runs with ``--no-engine`` (the engine check starts the real engine)."""
    if not engine:
        args = (*args, "--no-engine")
    code, out, err = await run_module(env, "sidecar.tools.doctor", *args, timeout=timeout)
    both = out + err
    assert KEY not in both
    for i in range(len(KEY) - 7):  # not even a fragment of it
        assert KEY[i : i + 8] not in both, KEY[i : i + 8]
    assert "Traceback" not in err, err
    return code, out


def row(out: str, title: str) -> str:
    """The report line of check ``title`` and, when there is one, its fix line."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line[6:].startswith(title + " "):
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            return line + ("\n" + nxt if nxt.strip().startswith("->") else "")
    raise AssertionError(f"no line for {title!r} in:\n{out}")


def status(out: str, title: str) -> str:
    return row(out, title).split()[0]


def completions(sim: SimulatedBackend) -> list:
    return [r for r in sim.requests if r.path == "/v1/completions"]


async def test_clean_run_all_ok(tmp_path, sim):
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 0, out
    for title in ("configuration", "base URL", "API key", "FIM", "TTFT", "local engine", "cache"):
        assert status(out, title) == "OK", out
    assert status(out, "GPU") in ("OK", "INFO"), out
    assert out.rstrip().splitlines()[-1].startswith("all good: ")
    assert row(out, "engine run").startswith("SKIP") and "--no-engine" in row(out, "engine run")
    assert not [ln for ln in out.splitlines() if ln.startswith(("WARN", "FAIL", "SKIP")) and "engine run" not in ln], (
        out
    )
    assert "API key present" in row(out, "configuration")
    assert "provider siliconflow" in row(out, "configuration")
    assert "'Qwen/Qwen2.5-Coder-7B-Instruct' listed" in row(out, "API key")
    assert "native FIM accepted" in row(out, "FIM")
    assert " ms to the first token" in row(out, "TTFT")
    # The FIM probe is one tiny native-FIM request; the TTFT request is what the sidecar sends.
    probe, ttft = completions(sim)
    assert probe.body["suffix"] and probe.body["max_tokens"] == 1 and probe.stream
    assert "suffix" in ttft.body and ttft.stream
    assert all(r.auth_present for r in sim.requests)


async def test_siliconflow_key_with_another_host_is_told_the_openai_shape(tmp_path, sim):
    # SILICONFLOW_API_KEY and a base URL that is not a SiliconFlow host, provider auto: the
    # OpenAI-compatible shape (no native FIM ``suffix``), and the report says how to force
    # SiliconFlow's.
    code, out = await run_doctor(cloud_env(tmp_path, sim, SIDECAR_PROVIDER=""), "--json")
    checks = {c["key"]: c for c in json.loads(out)["checks"]}
    conf = checks["config"]
    assert conf["status"] == "OK" and conf["data"]["provider"] == "openai"
    assert "provider openai" in conf["value"] and "OpenAI-compatible shape" in conf["value"]
    assert "SIDECAR_PROVIDER=siliconflow" in conf["value"] and "SILICONFLOW_API_KEY" in conf["value"]
    assert "SIDECAR_PROVIDER=siliconflow" in conf["data"]["provider_note"]
    assert completions(sim) and all("suffix" not in r.body for r in completions(sim))
    assert all(r.auth_present for r in sim.requests)
    # Named explicitly: SiliconFlow's shape, and no note.
    code, out = await run_doctor(cloud_env(tmp_path, sim), "--json")
    conf = {c["key"]: c for c in json.loads(out)["checks"]}["config"]
    assert conf["data"]["provider"] == "siliconflow" and "provider_note" not in conf["data"]
    assert "SIDECAR_PROVIDER" not in conf["value"]


async def test_json_shape(tmp_path, sim):
    code, out = await run_doctor(cloud_env(tmp_path, sim), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True and report["exit_code"] == 0
    checks = {c["key"]: c for c in report["checks"]}
    assert set(checks) == ALL_CHECKS
    for c in report["checks"]:
        assert set(c) == {"key", "title", "status", "value", "fix", "data"}
        assert c["status"] in ("OK", "WARN", "FAIL", "INFO", "SKIP")
    assert checks["config"]["data"]["api_key"] == "present"
    assert checks["config"]["data"]["base_url"] == sim.base_url
    assert isinstance(checks["network"]["data"]["round_trip_ms"], float)
    assert checks["network"]["data"]["tls_ms"] is None  # plain http on loopback
    assert checks["key"]["data"]["model_listed"] is True
    assert checks["fim"]["data"]["strategy"] == "suffix"
    assert 0 < checks["ttft"]["data"]["ttft_ms"] < 1500


async def test_content_exclusion_rules_are_listed(tmp_path, sim):
    """The rules in force: the user's ``.sidecarignore`` (beside the config file) and the
    ``ignore_paths`` setting, each with its patterns; an invalid line is named (WARN)."""
    env = cloud_env(tmp_path, sim, SIDECAR_IGNORE_PATHS="*.pem,private/")
    (Path(env["SIDECAR_CONFIG"]).parent / ".sidecarignore").write_text("secrets/\nbad\\\n")
    code, out = await run_doctor(env)
    assert code == 0, out
    line = row(out, "content exclusion")
    assert line.startswith("WARN"), line  # the invalid line is named
    assert ".sidecarignore: 1 rule (secrets/); 1 invalid line skipped (2)" in line, line
    assert "setting ignore_paths: 2 rules (*.pem, private/)" in line, line
    assert "no completion is requested from the cloud" in line, line
    code, out = await run_doctor(cloud_env(tmp_path / "other", sim))
    assert row(out, "content exclusion").startswith("INFO") and "no rules" in row(out, "content exclusion"), out


async def test_bad_key_fails(tmp_path, sim):
    sim.api_key = "sk-the-key-the-server-wants"
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 1
    line = row(out, "API key")
    assert line.startswith("FAIL") and "rejected" in line and "HTTP 401" in line
    assert ".cn keys work only with api.siliconflow.cn, .com keys with .com" in line
    assert status(out, "base URL") == "OK"  # reachable; only the key is wrong
    assert status(out, "FIM") == "SKIP" and status(out, "TTFT") == "SKIP"
    assert not completions(sim)  # nothing is generated with a rejected key


@pytest.mark.parametrize("name,limit", [("rate_limit_rpm", "RPM"), ("rate_limit_tpm", "TPM")])
async def test_rate_limited_warns_naming_the_limit(tmp_path, sim, name, limit):
    sim.inject(Fault.siliconflow(name), persistent=True)
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 0, out  # a rate limit is a warning, not a broken setup
    for title in ("FIM", "TTFT"):
        line = row(out, title)
        assert line.startswith("WARN") and "rate limited" in line and f"the {limit} limit" in line, out


async def test_overloaded_warns(tmp_path, sim):
    sim.inject(Fault.siliconflow("overloaded"))  # one-shot: the FIM probe gets it
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 0
    line = row(out, "FIM")
    assert line.startswith("WARN") and "overloaded" in line and "503" in line
    assert status(out, "TTFT") == "OK"


async def test_server_error_on_every_request_fails(tmp_path, sim):
    """HTTP 500 on every completion: nothing can work, so it is a FAIL, not "usable"."""
    sim.inject(Fault.status(500, {"code": 50500, "message": "Internal error", "data": None}), persistent=True)
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 1, out
    failed = [t for t in ("FIM", "TTFT") if status(out, t) == "FAIL"]
    assert failed and "500" in row(out, failed[0]), out
    assert "usable" not in out.splitlines()[-1], out


async def test_slow_ttft_warns_with_value_and_cause(tmp_path, sim):
    sim.set_latency(LatencyModel(ttft_ms=2000, tokens_per_s=500, seed=1))
    code, out = await run_doctor(cloud_env(tmp_path, sim), "--json")
    assert code == 0
    ttft = next(c for c in json.loads(out)["checks"] if c["key"] == "ttft")
    assert ttft["status"] == "WARN"
    assert 1900 <= ttft["data"]["ttft_ms"] < 5000
    assert f"{ttft['data']['ttft_ms']:.0f} ms to the first token" in ttft["value"]
    assert ttft["data"]["likely_cause"] == "model"  # loopback: the round trip is tiny
    assert "1500 ms" in ttft["fix"] and "model" in ttft["fix"]


async def test_model_without_fim_warns_naming_the_fallback(tmp_path, sim):
    sim.inject(Fault.status(400, FIM_REFUSED).on("/v1/completions"))
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 0
    line = row(out, "FIM")
    assert line.startswith("WARN") and "does not accept a FIM suffix" in line
    assert "the sidecar will use template" in line
    assert status(out, "TTFT") == "OK" and "strategy template" in row(out, "TTFT")
    probe, ttft = completions(sim)
    assert "suffix" in probe.body
    assert "suffix" not in ttft.body and ttft.body["prompt"].startswith("<|fim_prefix|>")


async def test_model_not_found_fails(tmp_path, sim):
    sim.inject(Fault.siliconflow("model_not_found"), persistent=True)
    code, out = await run_doctor(cloud_env(tmp_path, sim, SIDECAR_MODEL="Qwen/Qwen2.5-Coder-99B"))
    assert code == 1
    assert status(out, "API key") == "WARN" and "not listed" in row(out, "API key")
    line = row(out, "FIM")
    assert line.startswith("FAIL") and "model not found" in line and "SIDECAR_MODEL" in line


async def test_unreachable_base_url_names_host_and_cause(tmp_path):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = doctor_env(
        tmp_path,
        SILICONFLOW_API_KEY=KEY,
        SIDECAR_BASE_URL=f"http://127.0.0.1:{port}/v1",
        SIDECAR_PROVIDER="siliconflow",
    )
    code, out = await run_doctor(env, "--timeout", "3")
    assert code == 1
    line = row(out, "base URL")
    assert line.startswith("FAIL") and f"cannot reach 127.0.0.1:{port}" in line and "refused" in line.lower()
    assert all(status(out, t) == "SKIP" for t in ("API key", "FIM", "TTFT"))


async def test_local_only_skips_cloud_and_reports_corrupt_cache(tmp_path):
    cache = tmp_path / "sidecar" / "completions.sqlite3"
    cache.parent.mkdir()
    cache.write_bytes(b"this is not a database" * 100)
    code, out = await run_doctor(doctor_env(tmp_path))
    assert code == 0
    assert "mode local" in row(out, "configuration") and "API key absent" in row(out, "configuration")
    assert "no cloud backend is configured" in row(out, "base URL")
    assert all(status(out, t) == "SKIP" for t in ("base URL", "API key", "FIM", "TTFT"))
    line = row(out, "cache")
    assert line.startswith("WARN") and "corrupt" in line and "moved aside on next start" in line
    assert cache.read_bytes() == b"this is not a database" * 100  # doctor itself leaves it alone
    assert [p.name for p in cache.parent.iterdir()] == ["completions.sqlite3"]


async def test_healthy_cache_file_counts_entries(tmp_path, sim):
    cache = tmp_path / "sidecar" / "completions.sqlite3"
    cache.parent.mkdir()
    db = sqlite3.connect(cache)
    db.executescript(
        "CREATE TABLE entries (key TEXT PRIMARY KEY, text TEXT NOT NULL, partial INTEGER NOT NULL DEFAULT 0,"
        " created REAL NOT NULL, last_used REAL NOT NULL, size INTEGER NOT NULL);"
        "INSERT INTO entries VALUES ('a', 'x', 0, strftime('%s','now'), strftime('%s','now'), 161);"
        "INSERT INTO entries VALUES ('b', 'y', 0, strftime('%s','now'), strftime('%s','now'), 161);"
        "PRAGMA user_version = 1;"
    )
    db.close()
    os.chmod(cache, 0o600)
    code, out = await run_doctor(cloud_env(tmp_path, sim))
    assert code == 0
    line = row(out, "cache")
    assert line.startswith("OK") and "mode 0600" in line and "quick_check ok, 2 entries" in line


@pytest.mark.timeout(150)
async def test_engine_check_runs_a_real_prompt_by_default(tmp_path):
    code, out = await run_doctor(doctor_env(tmp_path, SIDECAR_MODE="local"), "--json", timeout=140, engine=True)
    report = json.loads(out)
    engine = next(c for c in report["checks"] if c["key"] == "engine")
    assert engine["status"] == "OK" or (engine["status"] == "WARN" and "Slow" in engine["fix"]), engine
    data = engine["data"]
    assert data["ttft_ms"] > 0 and data["total_ms"] >= data["ttft_ms"] and data["ready_s"] > 0
    assert data["tokens"] >= 1 and data["crashed"] is False and data["max_tokens"] == 16
    assert f"first token in {data['ttft_ms']:.0f} ms" in engine["value"]
    assert "~330-token prompt" in engine["value"]
    assert code == 0 and report["ok"] is True


@pytest.mark.timeout(150)
async def test_engine_check_fails_on_a_crashing_engine(tmp_path):
    # The engine kills itself with SIGSEGV on its first multi-token prompt (the warm-up),
    # as llama.cpp's AMX path does: a one-token probe would have passed.
    env = doctor_env(tmp_path, SIDECAR_MODE="local", SIDECAR_ENGINE_FAULT="segv_on_prompt")
    code, out = await run_doctor(env, timeout=140, engine=True)
    assert code == 1, out
    line = row(out, "engine run")
    assert line.startswith("FAIL") and "crashed with SIGSEGV (signal 11)" in line, out
    log_path = tmp_path / "state" / "sidecar" / "log" / "engine.log"
    assert f"its log is {log_path}" in line and log_path.is_file()
    assert "amx_tile" in line and "--rebuild-engine" in line  # the fix
    assert out.rstrip().splitlines()[-1].startswith("problems found: ")
    assert "all good" not in out


@pytest.mark.timeout(150)
async def test_crashing_engine_not_in_use_warns(tmp_path, sim):
    # Cloud mode: the local engine is installed but not used; its crash is a warning.
    code, out = await run_doctor(
        cloud_env(tmp_path, sim, SIDECAR_ENGINE_FAULT="segv_on_prompt"), timeout=140, engine=True
    )
    assert code == 0, out
    line = row(out, "engine run")
    assert line.startswith("WARN") and "SIGSEGV" in line
    assert out.rstrip().splitlines()[-1].startswith("usable, with warnings: ")


@pytest.mark.parametrize("content", [None, b"hello, not a model"])
async def test_bad_model_file_fails(tmp_path, content):
    model = tmp_path / "model.gguf"
    if content is not None:
        model.write_bytes(content)
    env = doctor_env(tmp_path, SIDECAR_MODE="local", SIDECAR_LOCAL_MODEL_PATH=str(model))
    code, out = await run_doctor(env, "--engine", engine=True)  # --engine is still accepted
    assert code == 1, out
    line = row(out, "local engine")
    assert line.startswith("FAIL") and str(model) in line
    assert ("not found" in line) if content is None else ("is not a GGUF model file" in line)
    assert "SIDECAR_LOCAL_MODEL_PATH" in line
    assert status(out, "engine run") == "SKIP"


async def test_engine_not_installed_fails_naming_what_to_install(tmp_path):
    shadow = tmp_path / "shadow" / "llama_cpp"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError(\"No module named 'llama_cpp'\")\n")
    env = doctor_env(tmp_path, SIDECAR_MODE="local", PYTHONPATH=str(shadow.parent))
    code, out = await run_doctor(env, engine=True)
    assert code == 1, out
    line = row(out, "local engine")
    assert line.startswith("FAIL") and "llama-cpp-python is not installed" in line
    assert "pip install 'sidecar-lsp[local]'" in line and "scripts/setup" in line
    assert status(out, "engine run") == "SKIP"


async def test_gpu_seen_through_nvidia_smi(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771 MiB'\n")
    fake.chmod(0o755)
    env = doctor_env(tmp_path, SIDECAR_MODE="local", PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    code, out = await run_doctor(env)
    assert code == 0
    line = row(out, "GPU")
    assert "NVIDIA H200, 143771 MiB" in line
    if "CPU-only build" in row(out, "local engine"):  # this llama-cpp-python cannot offload: say how to fix
        assert line.startswith("WARN") and "-DGGML_CUDA=on" in line
    else:
        assert line.split()[0] in ("OK", "INFO")
