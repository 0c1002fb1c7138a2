"""`sidecar doctor` as a real process against the simulated SiliconFlow backend on loopback:
each injected fault shows up in the report with the right status and advice, and the API
key never appears in the output."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import sys
from pathlib import Path

import pytest

from sidecar.simulator import Fault, LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-doctor-test-KEY"
CLOUD_CHECKS = ("config", "network", "key", "fim", "ttft")
ALL_CHECKS = {"config", "network", "key", "fim", "ttft", "local_engine", "gpu", "cache"}
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
    )
    base.update(env)
    return base


def cloud_env(tmp_path: Path, sim: SimulatedBackend, **env: str) -> dict[str, str]:
    return doctor_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, **env)


async def run_doctor(env: dict[str, str], *args: str, timeout: float = 40) -> tuple[int, str]:
    """Run ``python -m sidecar.doctor`` without blocking the loop the simulator runs on;
    returns (exit code, stdout). Fails if any piece of the key shows up in its output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "sidecar.doctor", *args, env=env, cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out_b, err_b = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    out, err = out_b.decode(), err_b.decode()
    both = out + err
    assert KEY not in both
    for i in range(len(KEY) - 7):  # not even a fragment of it
        assert KEY[i:i + 8] not in both, KEY[i:i + 8]
    assert "Traceback" not in err, err
    return proc.returncode, out


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
    assert not [ln for ln in out.splitlines() if ln.startswith(("WARN", "FAIL", "SKIP"))], out
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
    env = doctor_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=f"http://127.0.0.1:{port}/v1")
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


async def test_engine_flag_starts_times_and_stops_the_local_engine(tmp_path):
    code, out = await run_doctor(doctor_env(tmp_path, SIDECAR_MODE="local"), "--engine", "--json", timeout=120)
    report = json.loads(out)
    engine = next(c for c in report["checks"] if c["key"] == "engine")
    assert engine["status"] in ("OK", "WARN"), engine
    assert engine["data"]["ttft_ms"] > 0 and engine["data"]["ready_s"] > 0
    assert code == 0


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
