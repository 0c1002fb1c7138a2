"""Each setting is declared once (sidecar/config/settings.py): the tables derived from the
declaration keep every name that worked before, every setting has an environment
variable, values are coerced by the field's type, and docs/configuration.md's table is
the one the declaration generates."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sidecar import config
from sidecar.config import doc
from sidecar.config.declare import spec_of

ROOT = Path(__file__).resolve().parents[2]

#: The environment variables that existed before the declaration was unified.
LEGACY_ENV = {
    "SILICONFLOW_API_KEY": "api_key",
    "SIDECAR_API_KEY": "api_key",
    "SIDECAR_BASE_URL": "base_url",
    "SIDECAR_MODEL": "model",
    "SIDECAR_MODE": "mode",
    "SIDECAR_PROVIDER": "provider",
    "SIDECAR_CACHE_PATH": "cache_path",
    "SIDECAR_CACHE": "cache_enabled",
    "SIDECAR_PREFETCH": "prefetch_enabled",
    "SIDECAR_SILICONFLOW_REGION": "siliconflow_region",
    "SIDECAR_FIM": "fim",
    "SIDECAR_TOKEN_HEALING": "token_healing",
    "SIDECAR_MAX_TOKENS": "max_tokens",
    "SIDECAR_REQUEST_TIMEOUT_MS": "request_timeout_ms",
    "SIDECAR_PREFILL_TIMEOUT_MS": "prefill_timeout_ms",
    "SIDECAR_LOCAL_MODEL_PATH": "local_model_path",
    "SIDECAR_LOCAL_ENGINE": "local_engine",
    "SIDECAR_LOCAL_URL": "local_url",
    "SIDECAR_LOCAL_MODEL": "local_model",
    "SIDECAR_LOCAL_N_GPU_LAYERS": "local_n_gpu_layers",
    "SIDECAR_LOG_LEVEL": "log_level",
    "SIDECAR_SCHEDULING": "scheduling",
    "SIDECAR_LOG_FILE": "log_file",
    "SIDECAR_PROMETHEUS_PORT": "prometheus_port",
    "SIDECAR_LOCAL_API_KEY": "local_api_key",
    "SIDECAR_HEADERS": "headers",
    "SIDECAR_LOCAL_HEADERS": "local_headers",
    "SIDECAR_USER": "user",
    "SIDECAR_TRUST_ENV": "trust_env",
}


def test_docs_table_is_the_generated_one():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    table = doc.table_in(page)
    assert table is not None, "docs/configuration.md lost its settings-table markers"
    assert table == config.settings_table_markdown(), (
        "docs/configuration.md's settings table differs from the declaration; "
        "run `python -m sidecar.config docs/configuration.md`"
    )


def test_readme_points_to_the_table_instead_of_copying_it():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "docs/configuration.md" in readme
    assert "| key |" not in readme


def test_every_setting_has_an_environment_variable_and_the_old_ones_still_work():
    assert {k: v for k, v in config.ENV_VARS.items() if k in LEGACY_ENV} == LEGACY_ENV
    # Internal settings (api_key_for, base_url_error) are derived while loading, never set.
    settable = {f.name for f in dataclasses.fields(config.Settings) if not spec_of(f).internal}
    assert {"api_key_for", "base_url_error"} <= {f.name for f in dataclasses.fields(config.Settings)} - settable
    assert settable == set(config.ENV_VARS.values())
    assert config.OPENAI_ENV_VARS == {"OPENAI_API_KEY": "api_key", "OPENAI_BASE_URL": "base_url"}
    # The later variable wins, as before.
    assert (
        config.from_env({"SILICONFLOW_API_KEY": "sk-a-1234567", "SIDECAR_API_KEY": "sk-b-1234567"})["api_key"]
        == "sk-b-1234567"
    )


def test_new_variables_are_coerced_by_the_field_type():
    got = config.from_env(
        {
            "SIDECAR_TEMPERATURE": "0.5",
            "SIDECAR_HTTP2": "on",
            "SIDECAR_LOCAL_THREADS": "4",
            "SIDECAR_DEBOUNCE_MAX_MS": "",
            "SIDECAR_CACHE_MAX_BYTES": "2097152",
        }
    )
    assert got == {"temperature": 0.5, "http2": True, "local_threads": 4, "cache_max_bytes": 2097152}
    with pytest.raises(config.ConfigError, match="temperature.*between 0 and 2"):
        config.from_env({"SIDECAR_TEMPERATURE": "3"})
    with pytest.raises(config.ConfigError, match="http2.*true or false"):
        config.from_env({"SIDECAR_HTTP2": "maybe"})
    with pytest.raises(config.ConfigError, match="local_threads.*integer"):
        config.from_env({"SIDECAR_LOCAL_THREADS": "1.5"})


def test_backend_fields_and_secrets_come_from_the_declaration():
    assert set(config.BACKEND_FIELDS) == {
        "provider",
        "mode",
        "api_key",
        "base_url",
        "base_url_error",
        "siliconflow_region",
        "model",
        "http2",
        "connect_timeout_ms",
        "request_timeout_ms",
        "cold_start_timeout_ms",
        "local_model_path",
        "local_n_ctx",
        "local_n_gpu_layers",
        "local_threads",
        "local_engine",
        "local_url",
        "local_model",
        "headers",
        "local_api_key",
        "local_headers",
        "user",
        "trust_env",
    }
    s = config.Settings(
        api_key="sk-secret-1", local_api_key="sk-local-2", headers=(("X-Api-Key", "v"), ("X-Team", "t"))
    )
    shown = repr(s)
    assert "sk-secret-1" not in shown and "sk-local-2" not in shown and "X-Api-Key" not in shown
    d = s.public_dict()
    assert (d["api_key"], d["local_api_key"], d["headers"]) == ("***", "***", {"X-Api-Key": "***", "X-Team": "t"})
    with pytest.raises(config.ConfigError, match=r"api_key.*\*\*\*"):
        config.normalize({"api_key": 7}, "test")
