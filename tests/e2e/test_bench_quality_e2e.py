"""``python -m devtools.bench quality`` for real: the command line's refusals, one small real run against the embedded engine (the
shipped SmolLM2: fim-client not run), and one on Qwen2.5-Coder-0.5B when it is installed
(skipped otherwise, failed with SIDECAR_REQUIRE_CODE_MODEL=1). Hole making and scoring
are tests/unit/test_bench_quality.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_module, sidecar_env
from sidecar.completion.families import template_for

# -- command line -------------------------------------------------------------------------------


async def test_bad_arguments_exit_2(tmp_path):
    env = sidecar_env(tmp_path)
    prose = tmp_path / "notes.py"
    prose.write_text("# just\n# comments\n# here\n# and\n# more\n")
    for args, says in [
        (["--systems", "sidecar,bogus"], "--systems"),
        (["--files", str(tmp_path / "missing.py")], "no such file"),
        (["--files", str(prose)], "no holes could be made"),
        (["--model", str(tmp_path / "missing.gguf")], "no such file"),
        (["--model", "no-such-model"], "not a model name"),
        (["--fim-suffix-chars", "-1"], "at least 0"),
        (["--holes-per-kind", "0"], "at least 1"),
        (["--set", "no-equals-sign"], "KEY=VALUE"),
    ]:
        code, out, err = await run_module(env, "devtools.bench", "quality", *args, "--out", str(tmp_path / "o"))
        assert code == 2, (args, out, err)
        assert says in err, (args, err)


SMALL_PY = '''"""Small helpers for the end-to-end run of the quality benchmark."""

import os


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\\n") for line in f]


def count_words(lines):
    total = 0
    for line in lines:
        total += len(line.split())
    return total


def main(path):
    lines = read_lines(path)
    print(len(lines), count_words(lines))
'''


@pytest.mark.timeout(240)
async def test_real_run_and_bad_model(tmp_path):
    """One small real run (the shipped model, sidecar, fim-client and naive columns, one
    hole per kind) writes JSON with the columns, answers and per-kind rows; the
    fim-client column is reported as not run on SmolLM2 (no FIM template), not as 0 %; a
    model file that is not a GGUF makes the bench say it saw nothing and exit 1."""
    # The default model is what the sidecar would load: pin the shipped one (auto could
    # pick a code model installed on this machine).
    env = sidecar_env(tmp_path, SIDECAR_LOCAL_MODEL="smollm2-135m")
    src = tmp_path / "small.py"
    src.write_text(SMALL_PY)
    out = tmp_path / "out"
    code, stdout, stderr = await run_module(
        env,
        "devtools.bench",
        "quality",
        "--files",
        str(src),
        "--holes-per-kind",
        "1",
        "--max-tokens",
        "24",
        "--systems",
        "naive,fim-client,sidecar",
        "--set",
        "request_timeout_ms=30000",
        "--out",
        str(out),
        timeout=200,
    )
    assert code == 0, stdout + stderr
    data = json.loads((out / "quality.json").read_text())
    assert list(data["summaries"]) == ["sidecar", "fim-client", "naive"]  # the order of SYSTEMS, not of --systems
    assert data["setup"]["sidecar_settings"]["request_timeout_ms"] == 30000  # a loaded CI machine: no 8 s cut
    for name in ("sidecar", "naive"):
        s = data["summaries"][name]
        assert s["holes"] == 4
        assert s["answered"] > 0, (name, data["columns"][name]["records"])
        assert s["latency_p50_ms"] is not None
        assert set(s["by_kind"]) == {"mid_word", "mid_line", "end_of_line", "blank_line"}
    # The naive column talked to the sidecar's own engine, at the URL its status named.
    assert data["columns"]["sidecar"]["engine"]["url"].startswith("http://127.0.0.1:")
    assert data["columns"]["naive"]["engine"]["base_url"] == data["columns"]["sidecar"]["engine"]["url"]
    assert "exact first line" in stdout and "exact first line (end_of_line)" in stdout
    assert str(out / "quality.json") in stdout
    model = data["columns"]["fim-client"]["model"]
    if template_for(Path(model).stem) is None:  # SmolLM2 (unless SIDECAR_LOCAL_MODEL_PATH names a FIM model)
        fim = data["summaries"]["fim-client"]
        assert fim["not_run"].startswith("no FIM template: not run"), fim
        assert fim["exact_first_line_pct"] is None and fim["answered"] is None  # not 0 %
        assert data["columns"]["fim-client"]["records"] == [] and not data["failures"]
        assert "fim-client: no FIM template: not run" in stdout
        header = next(ln for ln in stdout.splitlines() if ln.startswith("metric"))
        assert header.split() == ["metric", "sidecar", "fim-client", "naive"]
        assert "  not run  " in next(ln for ln in stdout.splitlines() if ln.startswith("exact first line  "))
    else:
        assert data["summaries"]["fim-client"]["answered"] > 0

    bad = tmp_path / "bad.gguf"
    bad.write_text("not a model\n")
    code, stdout, stderr = await run_module(
        env,
        "devtools.bench",
        "quality",
        "--files",
        str(src),
        "--holes-per-kind",
        "1",
        "--systems",
        "sidecar",
        "--no-default-model",
        "--model",
        str(bad),
        "--out",
        str(tmp_path / "bad-out"),
        timeout=120,
    )
    assert code == 1, stdout + stderr
    assert "answered nothing" in stderr and "GGUF" in stderr, stderr


QWEN = "qwen2.5-coder-0.5b"


def _installed_qwen() -> Path | None:
    from sidecar.models import catalog, store

    try:
        return store.installed_path(catalog.get(QWEN))
    except Exception:  # noqa: BLE001 - a catalog that cannot be read: not installed
        return None


@pytest.mark.timeout(600)
async def test_fim_client_on_the_code_model(tmp_path):
    """A tiny bench (one hole per kind, sidecar and fim-client) on the installed
    Qwen2.5-Coder-0.5B, named by its catalog name: the fim-client column answers on the
    sidecar's engine and the JSON has per-kind rows. Skipped when the model is not
    installed, unless SIDECAR_REQUIRE_CODE_MODEL=1."""
    path = _installed_qwen()
    if path is None:
        why = f"{QWEN} is not installed (`sidecar model pull {QWEN}`)"
        if os.environ.get("SIDECAR_REQUIRE_CODE_MODEL") == "1":
            pytest.fail(f"SIDECAR_REQUIRE_CODE_MODEL=1 but {why}")
        pytest.skip(why)
    extra = {"SIDECAR_MODELS_DIR": os.environ["SIDECAR_MODELS_DIR"]} if os.environ.get("SIDECAR_MODELS_DIR") else {}
    env = sidecar_env(tmp_path, **extra)
    src = tmp_path / "small.py"
    src.write_text(SMALL_PY)
    out = tmp_path / "out"
    code, stdout, stderr = await run_module(
        env,
        "devtools.bench",
        "quality",
        "--files",
        str(src),
        "--holes-per-kind",
        "1",
        "--max-tokens",
        "24",
        "--systems",
        "sidecar,fim-client",
        "--no-default-model",
        "--model",
        QWEN,
        "--set",
        "request_timeout_ms=60000",
        "--out",
        str(out),
        timeout=540,
    )
    assert code == 0, stdout + stderr
    data = json.loads((out / "quality.json").read_text())
    assert data["setup"]["models"] == [str(path)]
    assert list(data["summaries"]) == ["sidecar", "fim-client"]
    fim_col = data["columns"]["fim-client"]
    assert fim_col["not_run"] is None and fim_col["fatal"] is None
    assert fim_col["engine"]["template"] == "qwen-coder"
    assert fim_col["engine"]["base_url"] == data["columns"]["sidecar"]["engine"]["url"]  # the same engine process
    for name in ("sidecar", "fim-client"):
        s = data["summaries"][name]
        assert s["holes"] == 4 and s["errors"] == 0, (name, data["columns"][name]["records"])
        assert s["answered"] > 0, (name, data["columns"][name]["records"])
        for kind in ("mid_word", "mid_line", "end_of_line", "blank_line"):
            row = s["by_kind"][kind]
            assert row["holes"] == 1
            assert {"exact", "exact_first_line_pct", "accepted_chars_per_hole", "empty", "empty_pct"} <= set(row)
    for rec in fim_col["records"]:
        assert "raw" in rec and rec["shown"] == rec["first"]
    lines = stdout.splitlines()
    assert next(ln for ln in lines if ln.startswith("metric")).split() == ["metric", "sidecar", "fim-client"]
    for kind in ("mid_word", "mid_line", "end_of_line", "blank_line"):
        row = next(ln for ln in lines if ln.startswith(f"exact first line ({kind})"))
        assert row.count("/1)") == 2, row  # "100% (1/1)" or "0% (0/1)" for both columns
