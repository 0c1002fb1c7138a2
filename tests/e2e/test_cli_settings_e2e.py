"""The command-line tools read the config file as ``serve`` does, run as real processes
(QA B6, B7).

- ``sidecar config``, ``sidecar cache`` and ``sidecar doctor`` resolve the settings as the
  server does (``config.settle``): settings that contradict each other drop only
  themselves, with one line on stderr each (``config``) or one WARN (``doctor``), and a
  config file that cannot be read at all is ignored whole, as serve ignores it.
- ``sidecar model use NAME`` changes ``local_model`` where the loader reads it: inside a
  ``[sidecar]`` table when that table sets it, and nothing else in the file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_module
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)
KEY = "sk-cli-settings-KEY-0123456789"
PAIR = "debounce_min_ms = 900\ndebounce_max_ms = 100\n"


def cli_env(tmp_path: Path, config_path: Path, **env: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_", "OPENAI_"))}
    base.update(
        SIDECAR_CONFIG=str(config_path),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        XDG_STATE_HOME=str(tmp_path / "state"),
        XDG_DATA_HOME=str(tmp_path / "data"),
        **env,
    )
    return base


def sidecar_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sidecar", *args], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


# ------------------------------------------------------------------ B7: sidecar config / cache
def test_config_settles_a_contradiction_as_serve_does(tmp_path):
    conf = tmp_path / "config.toml"
    conf.write_text(PAIR + "max_tokens = 64\n")
    env = cli_env(tmp_path, conf)
    r = sidecar_cli(env, "config")
    assert r.returncode == 0, r.stderr
    shown = json.loads(r.stdout)
    assert shown["max_tokens"] == 64  # the rest of the file stands
    assert shown["debounce_min_ms"] != 900 and shown["debounce_max_ms"] != 100  # the pair fell back
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "debounce_min_ms" in lines[0] and "debounce_max_ms" in lines[0] and "ignored" in lines[0]
    assert str(conf) in lines[0] and "Traceback" not in r.stderr
    c = sidecar_cli(env, "cache", "stats")
    assert c.returncode == 0 and json.loads(c.stdout)["entries"] == 0, c.stdout + c.stderr
    assert c.stderr.strip().splitlines() == lines


@pytest.mark.parametrize("kind", ["folder", "binary"])
def test_config_file_that_cannot_be_read_is_ignored_as_serve_ignores_it(tmp_path, kind):
    conf = tmp_path / "config.toml"
    if kind == "folder":
        conf.mkdir()
    else:
        conf.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)
    env = cli_env(tmp_path, conf, SIDECAR_MAX_TOKENS="48")
    r = sidecar_cli(env, "config")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["max_tokens"] == 48  # the environment still counts
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(conf) in lines[0] and "ignored" in lines[0], r.stderr
    if kind == "binary":
        assert conf.read_bytes().startswith(b"\x7fELF")


# ------------------------------------------------------------------ B7: sidecar doctor
@pytest.mark.parametrize("content", [PAIR.encode(), b"\xff\xfe not toml \x00\x01"], ids=["contradiction", "binary"])
async def test_doctor_warns_what_was_ignored_and_runs_every_check(tmp_path, content):
    conf = tmp_path / "config.toml"
    conf.write_bytes(content)
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1), api_key=KEY) as sim:
        env = cli_env(
            tmp_path,
            conf,
            SILICONFLOW_API_KEY=KEY,
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_PROVIDER="siliconflow",
            SIDECAR_LOCAL_MODEL="smollm2-135m",
        )
        code, out, err = await run_module(env, "sidecar.tools.doctor", "--no-engine", "--json", timeout=60)
    assert "Traceback" not in err and KEY not in out + err, err
    report = json.loads(out)
    checks = {c["key"]: c for c in report["checks"]}
    assert code == 0 and report["ok"], out
    ignored = checks["config_ignored"]
    assert ignored["status"] == "WARN" and str(conf) in ignored["value"], ignored
    if content == PAIR.encode():
        assert "debounce_min_ms" in ignored["value"] and "debounce_max_ms" in ignored["value"]
    else:
        assert "cannot read config file" in ignored["value"]
    assert checks["config"]["status"] == "OK"
    for key in ("network", "key", "fim", "ttft", "cache"):  # run on the settled settings, not skipped
        assert checks[key]["status"] == "OK", checks[key]


# ------------------------------------------------------------------ B6: sidecar model use
@pytest.mark.parametrize(
    "before,after",
    [
        (
            '# my settings\nprovider = "local"\n\n[sidecar]\nlocal_model = "smollm2-135m"  # pinned\nmax_tokens = 64\n',
            '# my settings\nprovider = "local"\n\n[sidecar]\nlocal_model = "qwen2.5-coder-0.5b"  # pinned\nmax_tokens = 64\n',
        ),
        # the table wins over the top level: only its line changes
        (
            'local_model = "smollm2-135m"\r\n[sidecar]\r\nlocalModel = \'smollm2-135m\'\r\n[headers]\r\nx = "y"\r\n',
            'local_model = "smollm2-135m"\r\n[sidecar]\r\nlocalModel = "qwen2.5-coder-0.5b"\r\n[headers]\r\nx = "y"\r\n',
        ),
        (
            'sidecar.local_model = "smollm2-135m"\nmax_tokens = 64\n',
            'sidecar.local_model = "qwen2.5-coder-0.5b"\nmax_tokens = 64\n',
        ),
    ],
    ids=["table", "table-over-top-level-crlf", "dotted"],
)
def test_model_use_changes_local_model_where_it_is(tmp_path, before, after):
    conf = tmp_path / "config.toml"
    conf.write_bytes(before.encode())
    env = cli_env(tmp_path, conf)
    assert json.loads(sidecar_cli(env, "config").stdout)["local_model"] == "smollm2-135m"
    r = sidecar_cli(env, "model", "use", "qwen2.5-coder-0.5b", "--force")
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith('replaced local_model = "qwen2.5-coder-0.5b"'), r.stderr
    assert conf.read_bytes() == after.encode()
    c = sidecar_cli(env, "config")
    assert c.returncode == 0 and json.loads(c.stdout)["local_model"] == "qwen2.5-coder-0.5b", c.stdout + c.stderr
