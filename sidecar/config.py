"""Settings: defaults, user config file, environment, initializationOptions, didChangeConfiguration.

Precedence, lowest to highest (DESIGN.md §2): built-in defaults, the user config file
(TOML, ``<platform config dir>/sidecar/config.toml`` or ``$SIDECAR_CONFIG``), environment
variables, LSP ``initializationOptions``, LSP ``workspace/didChangeConfiguration``.

Every value is validated; an invalid one raises :class:`ConfigError` naming the setting,
the bad value and where it came from. The API key is kept out of ``repr`` and logs.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import platformdirs

APP_NAME = "sidecar"

SILICONFLOW_HOSTS = {
    "cn": "https://api.siliconflow.cn/v1",
    "com": "https://api.siliconflow.com/v1",
}
DEFAULT_SILICONFLOW_MODEL = "Qwen/Qwen2.5-Coder-7B-Instruct"


class ConfigError(ValueError):
    """An invalid setting. The message names the key, the value and its source."""


@dataclass(frozen=True)
class Settings:
    """Resolved settings. Times are in milliseconds, budgets in tiktoken tokens.

    ``provider`` is one of ``siliconflow`` (hosted, key from ``SILICONFLOW_API_KEY``),
    ``openai`` (any OpenAI-compatible server at ``base_url``: vLLM, SGLang, LM Studio,
    llama-cpp-python), ``llama-server`` (llama.cpp's server, FIM through ``/infill``),
    ``ollama`` (``/api/generate``) or ``local`` (the managed llama-cpp-python engine, by
    default with the shipped SmolLM2 GGUF). ``auto`` picks siliconflow
    when a key is set, else openai when a base URL is set, else local.
    """

    provider: str = "auto"
    mode: str | None = None  # cloud | local | auto; None: cloud when configured, else local
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    siliconflow_region: str = "cn"
    model: str | None = None
    fim: str = "auto"  # auto | suffix | template | chat | prefix
    max_tokens: int = 64
    temperature: float = 0.2
    prefix_tokens: int = 1024
    suffix_tokens: int = 256
    request_timeout_ms: int = 8000
    cold_start_timeout_ms: int = 120000
    connect_timeout_ms: int = 3000
    http2: bool = False
    local_engine: str = "managed"  # managed | llama-server | ollama | openai
    local_url: str | None = None  # root URL of an external engine (llama-server, Ollama) or its /v1 base
    local_model: str | None = None  # model name an external engine serves (e.g. an Ollama tag)
    local_model_path: str | None = None
    local_n_ctx: int = 2048
    local_n_gpu_layers: int = 0
    local_threads: int | None = None
    scheduling: str = "adaptive"  # adaptive | naive (no debounce, no reuse: a baseline)
    debounce_min_ms: int = 50
    debounce_max_ms: int = 400
    first_line_deadline_ms: int = 250
    max_concurrent_streams: int = 4
    prefetch_enabled: bool = True
    prefetch_max_concurrent: int = 1
    prefetch_tokens_per_min: int | None = None  # None: 6,000 for cloud, 200,000 for a local engine
    cache_enabled: bool = True
    cache_path: str | None = None
    cache_max_entries: int = 20000
    cache_max_bytes: int = 64 * 1024 * 1024
    cache_ttl_s: int = 86400
    log_level: str = "warning"
    log_file: str | None = None  # JSON lines; None: <platform log dir>/sidecar/sidecar.jsonl; "off": none
    prometheus_port: int | None = None  # opt-in /metrics on 127.0.0.1
    latency_warn_ms: int = 1500  # warn once when the recent p90 TTFT passes this

    # ------------------------------------------------------------------ derived
    @property
    def cloud_provider(self) -> str | None:
        """The cloud side: ``siliconflow`` or ``openai``, or None when nothing is configured."""
        if self.provider in ("siliconflow", "openai"):
            return self.provider
        if self.provider == "local":
            return None
        if self.api_key:
            return "siliconflow"
        if self.base_url:
            return "openai"
        return None

    @property
    def resolved_mode(self) -> str:
        """``cloud``, ``local`` or ``auto``. Unset: cloud when a cloud backend is
        configured (a key or a base URL), else local."""
        if self.mode:
            return self.mode
        if self.provider == "local" or self.cloud_provider is None:
            return "local"
        return "cloud"

    @property
    def resolved_provider(self) -> str:
        """The backend requests go to first: the cloud provider, or ``local``."""
        if self.resolved_mode == "local" or self.cloud_provider is None:
            return "local"
        if self.resolved_mode == "auto":
            return "local"
        return self.cloud_provider

    @property
    def resolved_base_url(self) -> str | None:
        """Base URL ending in ``/v1`` (no trailing slash), or None for the embedded engine."""
        prov = self.cloud_provider
        if prov is None:
            return None
        if self.base_url:
            return self.base_url.rstrip("/")
        if prov == "siliconflow":
            return SILICONFLOW_HOSTS[self.siliconflow_region]
        return None

    @property
    def resolved_model(self) -> str:
        if self.model:
            return self.model
        if self.cloud_provider == "siliconflow":
            return DEFAULT_SILICONFLOW_MODEL
        return "default"

    @property
    def resolved_cache_path(self) -> Path:
        """``cache_path``, or ``<platform cache dir>/sidecar/completions.sqlite3``."""
        if self.cache_path:
            return Path(self.cache_path).expanduser()
        return Path(platformdirs.user_cache_dir(APP_NAME)) / "completions.sqlite3"

    def public_dict(self) -> dict[str, Any]:
        """Settings as a dict with the API key redacted (safe to log or send to the editor)."""
        d = dataclasses.asdict(self)
        d["api_key"] = "***" if self.api_key else None
        d["resolved_mode"] = self.resolved_mode
        d["resolved_provider"] = self.resolved_provider
        d["resolved_base_url"] = self.resolved_base_url
        d["resolved_model"] = self.resolved_model
        d["resolved_cache_path"] = str(self.resolved_cache_path)
        return d


_CHOICES = {
    "provider": ("auto", "siliconflow", "openai", "local"),
    "mode": ("auto", "cloud", "local"),
    "local_engine": ("managed", "llama-server", "ollama", "openai"),
    "siliconflow_region": ("cn", "com"),
    "fim": ("auto", "suffix", "template", "chat", "prefix"),
    "log_level": ("debug", "info", "warning", "error"),
    "scheduling": ("adaptive", "naive"),
}
# (min, max) inclusive for numbers
_RANGES: dict[str, tuple[float, float]] = {
    "max_tokens": (1, 4096),
    "temperature": (0.0, 2.0),
    "prefix_tokens": (16, 32768),
    "suffix_tokens": (0, 32768),
    "request_timeout_ms": (100, 600000),
    "cold_start_timeout_ms": (1000, 1800000),
    "connect_timeout_ms": (50, 60000),
    "local_n_ctx": (256, 131072),
    "local_n_gpu_layers": (-1, 1000),
    "local_threads": (1, 512),
    "debounce_min_ms": (0, 5000),
    "debounce_max_ms": (0, 5000),
    "first_line_deadline_ms": (0, 60000),
    "max_concurrent_streams": (1, 64),
    "cache_max_entries": (100, 10_000_000),
    "prefetch_max_concurrent": (1, 16),
    "prefetch_tokens_per_min": (0, 100_000_000),
    "cache_max_bytes": (1 << 20, 1 << 40),
    "cache_ttl_s": (1, 10 * 365 * 86400),
    "prometheus_port": (1, 65535),
    "latency_warn_ms": (50, 600000),
}

# Environment variable -> setting key.
ENV_VARS = {
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
    "SIDECAR_MAX_TOKENS": "max_tokens",
    "SIDECAR_REQUEST_TIMEOUT_MS": "request_timeout_ms",
    "SIDECAR_LOCAL_MODEL_PATH": "local_model_path",
    "SIDECAR_LOCAL_ENGINE": "local_engine",
    "SIDECAR_LOCAL_URL": "local_url",
    "SIDECAR_LOCAL_MODEL": "local_model",
    "SIDECAR_LOCAL_N_GPU_LAYERS": "local_n_gpu_layers",
    "SIDECAR_LOG_LEVEL": "log_level",
    "SIDECAR_SCHEDULING": "scheduling",
    "SIDECAR_LOG_FILE": "log_file",
    "SIDECAR_PROMETHEUS_PORT": "prometheus_port",
}

_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
# Accept camelCase keys from editors (e.g. "maxTokens").
_ALIASES = {
    "".join(w.capitalize() if i else w for i, w in enumerate(name.split("_"))): name
    for name in _FIELDS
}
_ALIASES["apiKey"] = "api_key"
_ALIASES["baseUrl"] = "base_url"


def _coerce(key: str, value: Any, source: str) -> Any:
    """Convert ``value`` to the type of setting ``key``; raise ConfigError on failure."""
    f = _FIELDS[key]
    type_name = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))

    def bad(expect: str) -> ConfigError:
        shown = "***" if key == "api_key" else repr(value)
        return ConfigError(f"invalid setting '{key}' from {source}: expected {expect}, got {shown}")

    if value is None or (isinstance(value, str) and value == "" and "None" in type_name):
        if "None" in type_name:
            return None
        raise bad("a value")
    if type_name.startswith("int"):
        if isinstance(value, bool):
            raise bad("an integer")
        try:
            out: Any = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            out = None
        if out is None:
            raise bad("an integer")
    elif type_name.startswith("float"):
        if isinstance(value, bool):
            raise bad("a number")
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise bad("a number") from None
    elif type_name.startswith("bool"):
        if isinstance(value, bool):
            out = value
        elif isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            out = value.lower() in ("1", "true", "yes", "on")
        else:
            raise bad("true or false")
    else:
        if not isinstance(value, str):
            raise bad("a string")
        out = value.strip()
        if key in _CHOICES:
            out = out.lower()
            if out not in _CHOICES[key]:
                raise bad("one of " + ", ".join(_CHOICES[key]))
        if key in ("base_url", "local_url") and out and not out.startswith(("http://", "https://")):
            raise bad("an http:// or https:// URL")
    if key in _RANGES and out is not None:
        lo, hi = _RANGES[key]
        if not (lo <= out <= hi):
            raise bad(f"a value between {lo:g} and {hi:g}")
    return out


# Keys editors send under the "sidecar" section that are not server settings.
_EDITOR_ONLY = frozenset({"trace", "serverPath", "server_path", "python", "pythonPath", "enable", "enabled"})


def normalize(raw: Mapping[str, Any], source: str, errors: list[str] | None = None) -> dict[str, Any]:
    """Validate a mapping of settings (snake_case or camelCase keys, optionally nested
    under a ``sidecar`` section) and return ``{setting: coerced value}``.

    A ``None`` value means "not set" and is skipped. With ``errors`` None, the first
    unknown key or invalid value raises ConfigError; with a list, each problem is appended
    to it as a message and only that key is dropped, so one bad value never discards the
    rest of its source.
    """
    if "sidecar" in raw and isinstance(raw["sidecar"], Mapping):
        raw = {**{k: v for k, v in raw.items() if k != "sidecar"}, **raw["sidecar"]}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if v is None or k in _EDITOR_ONLY:
            continue
        key = _ALIASES.get(k, k)
        try:
            if key not in _FIELDS:
                raise ConfigError(f"unknown setting '{k}' from {source} (ignored)")
            out[key] = _coerce(key, v, source)
        except ConfigError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    return out


def config_file_path() -> Path:
    """The user config file: ``$SIDECAR_CONFIG`` or ``<platform config dir>/sidecar/config.toml``."""
    env = os.environ.get("SIDECAR_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def from_file(path: Path | None = None, errors: list[str] | None = None) -> dict[str, Any]:
    """Read and validate the TOML config file; a missing file gives ``{}``.

    Raises ConfigError when the file is not valid TOML, or (with ``errors`` None) holds
    an invalid setting; see :func:`normalize` for ``errors``.
    """
    path = path or config_file_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return normalize(data, f"config file {path}", errors)


def from_env(environ: Mapping[str, str] | None = None, errors: list[str] | None = None) -> dict[str, Any]:
    """Settings from environment variables (see ``ENV_VARS``). Empty variables are
    ignored; an invalid one raises ConfigError, or with ``errors`` is reported there and
    skipped alone."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    for var, key in ENV_VARS.items():
        val = environ.get(var)
        if val:
            try:
                out[key] = _coerce(key, val, f"environment variable {var}")
            except ConfigError as exc:
                if errors is None:
                    raise
                errors.append(str(exc))
    return out


def build(*layers: Mapping[str, Any]) -> Settings:
    """Merge already-normalized layers (later wins) over the defaults.

    Raises ConfigError when the merged values contradict each other.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    s = Settings(**merged)
    if s.local_engine != "managed" and not s.local_url and s.resolved_mode in ("local", "auto"):
        raise ConfigError(f"invalid settings: local_engine '{s.local_engine}' needs local_url (SIDECAR_LOCAL_URL)")
    if s.local_engine == "ollama" and not s.local_model and s.resolved_mode in ("local", "auto"):
        raise ConfigError("invalid settings: local_engine 'ollama' needs local_model (SIDECAR_LOCAL_MODEL), e.g. qwen2.5-coder:1.5b")
    if s.debounce_min_ms > s.debounce_max_ms:
        raise ConfigError(
            f"invalid settings: debounce_min_ms ({s.debounce_min_ms}) is above debounce_max_ms ({s.debounce_max_ms})"
        )
    return s


def load_base() -> tuple[dict[str, Any], dict[str, Any]]:
    """The two lowest layers above defaults: (config file, environment).

    Raises ConfigError for an invalid value in either.
    """
    return from_file(), from_env()
