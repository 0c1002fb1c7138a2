"""Providers, keys, headers and proxies (issue 15): SiliconFlow's shape only for
SiliconFlow, a key for every backend kind, custom headers, the ``user`` field, and the
proxy variables (never for loopback). The settings and the backends they build, in
process; real stdio, the simulator and the recording proxy are
tests/e2e/test_providers_e2e.py."""

from __future__ import annotations

import pytest

from sidecar import config
from sidecar.backends.factory import build_cloud, build_local

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-providers-0123456789"


@pytest.mark.parametrize(
    "env, expected",
    [
        ({"SIDECAR_API_KEY": KEY}, "siliconflow"),  # no URL: SiliconFlow's own host
        ({"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.com/v1"}, "siliconflow"),
        ({"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.cn/v1/"}, "siliconflow"),
        ({"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "https://vllm.internal.example/v1"}, "openai"),
        ({"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "https://siliconflow.cn.evil.example/v1"}, "openai"),
        ({"SIDECAR_BASE_URL": "http://10.1.2.3:8000/v1"}, "openai"),
        (
            {"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "http://10.1.2.3:8000/v1", "SIDECAR_PROVIDER": "siliconflow"},
            "siliconflow",
        ),
        # The key's variable never chooses the shape: a host that is not SiliconFlow's gets the
        # OpenAI shape unless SIDECAR_PROVIDER names SiliconFlow.
        ({"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "http://127.0.0.1:9/v1"}, "openai"),
        ({"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "https://vllm.internal.example/v1"}, "openai"),
        (
            {"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "http://127.0.0.1:9/v1", "SIDECAR_PROVIDER": "auto"},
            "openai",
        ),
        (
            {
                "SILICONFLOW_API_KEY": KEY,
                "SIDECAR_BASE_URL": "http://127.0.0.1:9/v1",
                "SIDECAR_PROVIDER": "siliconflow",
            },
            "siliconflow",
        ),
        (
            {"SILICONFLOW_API_KEY": KEY, "SIDECAR_API_KEY": KEY + "x", "SIDECAR_BASE_URL": "http://127.0.0.1:9/v1"},
            "openai",
        ),
        ({"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.cn/v1"}, "siliconflow"),
        # Look-alike hosts are not SiliconFlow's, whichever key.
        ({"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.cn.evil.com/v1"}, "openai"),
        ({"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "https://evilsiliconflow.com/v1"}, "openai"),
        ({"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.com.attacker.net/v1"}, "openai"),
        # No base URL: a key from our variables is SiliconFlow's own host.
        ({"SILICONFLOW_API_KEY": KEY}, "siliconflow"),
        # OPENAI_* are read after ours; an OpenAI key alone is never sent to SiliconFlow.
        ({"OPENAI_API_KEY": KEY}, None),
        ({"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "https://gw.example/v1"}, "openai"),
        (
            {
                "OPENAI_BASE_URL": "https://gw.example/v1",
                "SIDECAR_BASE_URL": "https://api.siliconflow.com/v1",
                "SIDECAR_API_KEY": KEY,
            },
            "siliconflow",
        ),
    ],
)
def test_provider_detection(env, expected):
    s = config.build(config.from_env(env))
    assert s.cloud_provider == expected
    if expected == "siliconflow" and "SIDECAR_BASE_URL" not in env:
        assert s.resolved_base_url == "https://api.siliconflow.cn/v1"


def test_provider_detection_from_the_config_file(tmp_path):
    # A key in the config file with no base URL is SiliconFlow's own host; with a
    # self-hosted base URL it is the OpenAI shape, unless provider names SiliconFlow.
    path = tmp_path / "config.toml"
    path.write_text(f'api_key = "{KEY}"\n')
    s = config.build(config.from_file(path))
    assert (s.cloud_provider, s.resolved_base_url) == ("siliconflow", "https://api.siliconflow.cn/v1")
    path.write_text(f'api_key = "{KEY}"\nbase_url = "http://10.0.0.5:8000/v1"\n')
    assert config.build(config.from_file(path)).cloud_provider == "openai"
    path.write_text(f'api_key = "{KEY}"\nbase_url = "http://10.0.0.5:8000/v1"\nprovider = "siliconflow"\n')
    assert config.build(config.from_file(path)).cloud_provider == "siliconflow"


def test_provider_note_only_for_a_siliconflow_key_on_another_host():
    own = {"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "http://10.1.2.3:8000/v1"}
    s = config.build(config.from_env(own))
    assert s.cloud_provider == "openai" and s.provider_note
    assert "10.1.2.3" in s.provider_note and "SIDECAR_PROVIDER=siliconflow" in s.provider_note
    assert KEY not in s.provider_note
    for env in (
        {**own, "SIDECAR_PROVIDER": "siliconflow"},
        {**own, "SIDECAR_PROVIDER": "openai"},
        {"SILICONFLOW_API_KEY": KEY, "SIDECAR_BASE_URL": "https://api.siliconflow.com/v1"},
        {"SILICONFLOW_API_KEY": KEY},
        {"SIDECAR_API_KEY": KEY, "SIDECAR_BASE_URL": "http://10.1.2.3:8000/v1"},
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://10.1.2.3:8000/v1"},
    ):
        assert config.build(config.from_env(env)).provider_note is None, env


def test_openai_variables_come_after_ours():
    s = config.build(
        config.from_env(
            {"OPENAI_API_KEY": "sk-openai-111111", "SIDECAR_API_KEY": KEY, "OPENAI_BASE_URL": "https://gw.example/v1"}
        )
    )
    assert s.api_key == KEY and s.resolved_base_url == "https://gw.example/v1"
    # A key set by a later layer (initializationOptions) drops the variable's hint: the
    # OpenAI key's "configures nothing alone" no longer applies.
    s = config.build(
        config.from_env({"OPENAI_API_KEY": "sk-openai-111111"}),
        config.normalize({"apiKey": "sk-other-22222222"}, "initializationOptions"),
    )
    assert s.cloud_provider == "siliconflow" and s.api_key_for is None
    with pytest.raises(config.ConfigError):
        config.normalize({"api_key_for": "siliconflow"}, "test")


def test_an_invalid_base_url_leaves_no_cloud_in_any_layer():
    """A base URL that is set but invalid is a slot of its layer (``base_url_error``):
    no cloud, whatever the key and provider; a higher layer's valid URL replaces it, and
    it replaces a lower layer's valid URL. Without ``errors`` it still raises."""
    errors: list[str] = []
    bad_env = config.from_env(
        {
            "SIDECAR_BASE_URL": "htps://gw.example/v1",
            "SIDECAR_API_KEY": KEY,
            "SIDECAR_PROVIDER": "siliconflow",
            "OPENAI_BASE_URL": "https://other.example/v1",
        },
        errors,
    )
    assert len(errors) == 1 and "htps://gw.example/v1" in errors[0] and "base_url" not in bad_env
    s = config.build(bad_env)
    assert (s.cloud_provider, s.resolved_base_url, s.resolved_mode) == (None, None, "local")
    assert s.base_url_error == errors[0] and config.refused_base_url(errors[0], s).endswith(config.load.NO_CLOUD)
    assert config.refused_base_url("another message", s) is None
    good = config.normalize({"baseUrl": "https://gw.example/v1"}, "initializationOptions")
    s = config.build(bad_env, good)
    assert s.cloud_provider == "siliconflow" and s.base_url_error is None
    assert config.refused_base_url(errors[0], s) is None
    bad_file = config.normalize({"base_url": "ftp://gw.example/v1"}, "config file", [])
    assert config.build(bad_file, {"api_key": KEY}).cloud_provider is None
    assert config.build({"base_url": "https://gw.example/v1"}, bad_file, {"api_key": KEY}).cloud_provider is None
    with pytest.raises(config.ConfigError):
        config.from_env({"SIDECAR_BASE_URL": "htps://gw.example/v1"})


def test_an_explicit_mode_that_is_already_in_use_needs_no_new_backend():
    unset = config.Settings(api_key=KEY)
    assert not config.backend_changed(unset, config.Settings(api_key=KEY, mode="cloud"))
    assert config.backend_changed(unset, config.Settings(api_key=KEY, mode="local"))
    assert config.backend_changed(config.Settings(), config.Settings(base_url_error="bad"))


def test_header_settings_are_validated_and_redacted():
    layer = config.from_env({"SIDECAR_HEADERS": '{"X-Team": "infra", "X-Api-Key": "gateway-secret-123"}'})
    s = config.build(layer, config.normalize({"localHeaders": {"X-Node": 7}, "user": "alice"}, "initializationOptions"))
    assert s.headers == (("X-Team", "infra"), ("X-Api-Key", "gateway-secret-123"))
    assert s.local_headers == (("X-Node", "7"),) and s.user == "alice"
    assert "gateway-secret-123" not in str(s.public_dict()) and "gateway-secret-123" not in repr(s)
    for bad in ('{"Bad Name": "x"}', '{"X-A": "line\\nbreak"}', '{"Host": "evil"}', "[1, 2]", "not json"):
        with pytest.raises(config.ConfigError, match="headers"):
            config.from_env({"SIDECAR_HEADERS": bad})


async def test_loopback_engines_never_trust_proxy_variables():
    s = config.build(
        {
            "base_url": "https://gw.example/v1",
            "local_engine": "llama-server",
            "local_url": "http://127.0.0.1:8080",
            "mode": "auto",
            "api_key": KEY,
        }
    )
    cloud, local = build_cloud(s), build_local(s)
    loop = build_cloud(config.build({"base_url": "http://localhost:9/v1"}))
    off = build_cloud(config.build({"base_url": "https://gw.example/v1", "trust_env": False}))
    try:
        assert cloud.trust_env is True and local.trust_env is False
        assert loop.trust_env is False and off.trust_env is False
        # The cloud key never goes to the local engine.
        assert "authorization" not in {k.lower() for k in local._client.headers}
    finally:
        await cloud.aclose()
        await local.aclose()
        await loop.aclose()
        await off.aclose()


def test_provider_and_engine_names_are_compared_nowhere_but_their_tables():
    """Names of providers, local engines and wire formats are spelled in
    sidecar/providers.py and completion/dialects.py; code elsewhere reads those tables."""
    import re
    from pathlib import Path

    from sidecar import providers
    from sidecar.backends.factory import _LOCAL_BUILDERS
    from sidecar.completion.dialects import DIALECTS

    assert set(_LOCAL_BUILDERS) == set(providers.LOCAL_ENGINES.values())
    assert all(p.api in DIALECTS for p in providers.PROVIDERS.values() if p.api)
    names = {*providers.PROVIDERS, *providers.LOCAL_ENGINES, *DIALECTS} - {"local"}
    quoted = "|".join(re.escape(n) for n in names)
    compare = re.compile(rf"""(?:[=!]=|\bin)\s*\(?[^\n#]*?["']({quoted})["']|["']({quoted})["']\s*(?:[=!]=|\bin\b)""")
    root = Path(__file__).resolve().parents[2] / "sidecar"
    found = [
        f"{p.relative_to(root)}:{i}: {line.strip()}"
        for p in root.rglob("*.py")
        if p.name not in ("providers.py", "dialects.py")
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if compare.search(line) and not line.lstrip().startswith(("#", "``", '"', "'"))
    ]
    assert not found, found
