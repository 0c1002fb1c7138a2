"""Settings: defaults, user config file, environment, initializationOptions, didChangeConfiguration.

Precedence, lowest to highest (docs/architecture.md, "Facts we checked"): built-in defaults, the user config file
(TOML, ``<platform config dir>/sidecar/config.toml`` or ``$SIDECAR_CONFIG``), environment
variables, LSP ``initializationOptions``, LSP ``workspace/didChangeConfiguration``.

Every value is validated; an invalid one raises :class:`ConfigError` naming the setting,
the bad value and where it came from. The API key is kept out of ``repr`` and logs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import urlsplit

import platformdirs

from .observability import redact as _redact

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
    default with the shipped SmolLM2 GGUF). ``auto`` picks siliconflow for a base URL on
    a SiliconFlow host or for a key without a base URL, openai for any other base URL,
    else local (see :attr:`cloud_provider`).
    """

    provider: str = "auto"
    mode: str | None = None  # cloud | local | auto; None: cloud when configured, else local
    api_key: str | None = field(default=None, repr=False)
    base_url: str | None = None
    siliconflow_region: str = "cn"
    model: str | None = None
    fim: str = "auto"  # auto | suffix | template | chat | prefix
    token_healing: bool = True  # back the prompt up to a token boundary (completion/healing/)
    max_tokens: int = 64
    temperature: float = 0.2
    prefix_tokens: int = 1024
    suffix_tokens: int = 256
    # Largest windows; the cut ones follow the latency budget (completion/window.py).
    target_ttft_ms: int | None = None  # cold-prompt TTFT target; None: 300 local, off for cloud; 0: off
    crossfile_tokens: int | None = None  # other files' snippets; None: 256 local, 512 cloud; 0: off
    request_timeout_ms: int = 8000
    cold_start_timeout_ms: int = 120000
    # A local engine's prompt evaluation may outlive its request: a stream with no text
    # yet runs up to this long in the background (completion/stream.py, issue "prefill").
    prefill_timeout_ms: int = 30000
    connect_timeout_ms: int = 3000
    http2: bool = False
    local_engine: str = "managed"  # managed | llama-server | ollama | openai
    local_url: str | None = None  # root URL of an external engine (llama-server, Ollama) or its /v1 base
    # Managed engine: a catalog name (`sidecar model list`) or "auto" (None: auto; the
    # installed code model that fits, else the shipped SmolLM2; sidecar/models/select.py).
    # External engine: the model name it serves (e.g. an Ollama tag).
    local_model: str | None = None
    local_model_path: str | None = None  # a GGUF file for the managed engine; wins over local_model
    local_n_ctx: int = 2048
    local_n_gpu_layers: int | None = None  # None: every layer when the engine build has a GPU backend, else 0
    local_threads: int | None = None
    scheduling: str = "adaptive"  # adaptive | naive (no debounce, no reuse: a baseline)
    debounce_min_ms: int = 50
    debounce_max_ms: int | None = None  # None: 400 for a cloud backend, 100 for a local engine
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
    # Shared backends (docs/backends.md "Rate limits and shared backends"). Header tables are
    # ((name, value), ...) so that Settings stays hashable.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # sent to the cloud/OpenAI-compatible backend
    local_api_key: str | None = field(default=None, repr=False)  # Bearer key for an external local engine
    local_headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # sent to an external local engine
    user: str | None = None  # end-user id in OpenAI-shaped request bodies ("user")
    trust_env: bool = True  # honour HTTPS_PROXY/HTTP_PROXY/NO_PROXY (never for loopback URLs)
    #: Internal: the provider the API key's variable names (SILICONFLOW_API_KEY:
    #: "siliconflow", OPENAI_API_KEY: "openai"), None when it came from elsewhere. Only
    #: "openai" changes detection (an OpenAI key alone configures nothing); "siliconflow"
    #: only feeds :attr:`provider_note`, never the request shape.
    api_key_for: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # Every configured key is redacted from logs, messages and errors from now on.
        _redact.register_secret(self.api_key)
        _redact.register_secret(self.local_api_key)
        for name, value in (*self.headers, *self.local_headers):
            if _SECRET_HEADER.search(name):
                _redact.register_secret(value)

    # ------------------------------------------------------------------ derived
    @property
    def cloud_provider(self) -> str | None:
        """The cloud side: ``siliconflow`` or ``openai``, or None when nothing is configured.

        ``provider = "siliconflow"`` or ``"openai"`` is taken as set, whatever the URL.
        With ``provider = "auto"``: a ``base_url`` on a SiliconFlow host
        (``is_siliconflow_url``: ``siliconflow.cn``, ``siliconflow.com`` or a subdomain) is
        ``siliconflow``; any other ``base_url`` is ``openai``, whichever variable the key
        came from (``SILICONFLOW_API_KEY`` included): SiliconFlow's request shape (native
        FIM ``suffix``, its default model) is never sent to a host that is not SiliconFlow
        unless ``provider = "siliconflow"`` (``SIDECAR_PROVIDER=siliconflow``) says so.
        Without a ``base_url`` a key (``SIDECAR_API_KEY``, ``SILICONFLOW_API_KEY``, the
        config file, the editor) means SiliconFlow's own host, except a key from
        ``OPENAI_API_KEY``, which alone configures nothing (it is never sent to SiliconFlow).
        """
        if self.provider in ("siliconflow", "openai"):
            return self.provider
        if self.provider == "local":
            return None
        if self.base_url:
            return "siliconflow" if is_siliconflow_url(self.base_url) else "openai"
        if self.api_key and self.api_key_for != "openai":
            return "siliconflow"
        return None

    @property
    def provider_note(self) -> str | None:
        """One sentence for a setup that may expect SiliconFlow's shape but does not get it:
        the key comes from ``SILICONFLOW_API_KEY``, ``provider`` is ``auto`` and the base
        URL is not a SiliconFlow host, so requests take the OpenAI-compatible shape. None
        otherwise. ``sidecar doctor`` and the server's start-up log show it."""
        if (self.provider != "auto" or not self.base_url or is_siliconflow_url(self.base_url)
                or not self.api_key or self.api_key_for != "siliconflow"):
            return None
        host = urlsplit(self.base_url).hostname or self.base_url
        return (f"the key comes from SILICONFLOW_API_KEY but {host} is not a SiliconFlow host, so requests use "
                "the OpenAI-compatible shape; set SIDECAR_PROVIDER=siliconflow (provider = \"siliconflow\") "
                "to send SiliconFlow's")

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
        d["local_api_key"] = "***" if self.local_api_key else None
        for k in ("headers", "local_headers"):
            d[k] = {n: ("***" if _SECRET_HEADER.search(n) else v) for n, v in getattr(self, k)}
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
    "prefill_timeout_ms": (100, 600000),
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
    "target_ttft_ms": (0, 600000),
    "crossfile_tokens": (0, 8192),
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
#: Read only when our own variables leave the setting unset (after ENV_VARS).
OPENAI_ENV_VARS = {"OPENAI_API_KEY": "api_key", "OPENAI_BASE_URL": "base_url"}
#: Settings no source may set: derived while loading.
_INTERNAL = frozenset({"api_key_for"})
_SECRET_SETTINGS = frozenset({"api_key", "local_api_key", "headers", "local_headers"})

# Header names are RFC 9110 §5.6.2 tokens; values carry no CR, LF or NUL (§5.5).
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)
#: Headers that the HTTP client owns; a custom table may not set them.
_RESERVED_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "content-type",
                               "te", "upgrade", "keep-alive", "proxy-authorization", "proxy-connection"})


def is_siliconflow_url(url: str) -> bool:
    """True when ``url``'s host is SiliconFlow's: ``siliconflow.cn``, ``siliconflow.com``
    or a subdomain of them (``api.siliconflow.cn``, ``api.siliconflow.com``)."""
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    return any(host == d or host.endswith("." + d) for d in ("siliconflow.cn", "siliconflow.com"))


def _coerce_headers(key: str, value: Any, source: str) -> tuple[tuple[str, str], ...]:
    """A header table (a mapping, or a JSON object in a string such as ``SIDECAR_HEADERS``)
    as ``((name, value), ...)``. Raises ConfigError for a name that is not an RFC 9110
    token, a reserved name, or a value that is not a string without CR/LF."""
    def bad(why: str) -> ConfigError:
        return ConfigError(f"invalid setting '{key}' from {source}: {why}")

    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise bad('expected a JSON object such as {"X-Team": "infra"}') from None
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise bad("expected a table of header names to values")
    out: list[tuple[str, str]] = []
    for name, val in value.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise bad(f"{name!r} is not a valid header name")
        if name.lower() in _RESERVED_HEADERS:
            raise bad(f"the header {name!r} is set by sidecar's HTTP client")
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            val = str(val)
        if not isinstance(val, str) or any(c in val for c in "\r\n\0"):
            raise bad(f"the value of {name!r} must be a string on one line")
        out.append((name, val.strip()))
    return tuple(out)

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
        shown = "***" if key in _SECRET_SETTINGS else repr(value)
        return ConfigError(f"invalid setting '{key}' from {source}: expected {expect}, got {shown}")

    if key in ("headers", "local_headers"):
        return _coerce_headers(key, value, source)
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
            if key not in _FIELDS or key in _INTERNAL:
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
    """Settings from environment variables (see ``ENV_VARS``, then ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` where ours left the setting unset). Empty variables are
    ignored; an invalid one raises ConfigError, or with ``errors`` is reported there and
    skipped alone. The result notes which provider the key's variable names
    (``api_key_for``: an ``OPENAI_API_KEY`` alone configures nothing, see
    :attr:`Settings.cloud_provider`; a ``SILICONFLOW_API_KEY`` only feeds
    :attr:`Settings.provider_note`, it never chooses SiliconFlow's request shape)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    key_var = None
    for var, key in [*ENV_VARS.items(), *OPENAI_ENV_VARS.items()]:
        val = environ.get(var)
        if val:
            if key in ("api_key", "local_api_key"):  # every key variable, even one a later one overrides
                _redact.register_secret(val)
            if var in OPENAI_ENV_VARS and key in out:
                continue  # OPENAI_* only fill in what our own variables left unset
            try:
                out[key] = _coerce(key, val, f"environment variable {var}")
            except ConfigError as exc:
                if errors is None:
                    raise
                errors.append(str(exc))
                continue
            if key == "api_key":
                key_var = var
    if key_var in ("SILICONFLOW_API_KEY", "OPENAI_API_KEY"):
        out["api_key_for"] = "siliconflow" if key_var == "SILICONFLOW_API_KEY" else "openai"
    return out


def build(*layers: Mapping[str, Any]) -> Settings:
    """Merge already-normalized layers (later wins) over the defaults.

    Raises ConfigError when the merged values contradict each other.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
        if "api_key" in layer:  # the key's provider hint follows the layer that set the key
            merged["api_key_for"] = layer.get("api_key_for")
    s = Settings(**merged)
    if s.local_engine != "managed" and not s.local_url and s.resolved_mode in ("local", "auto"):
        raise ConfigError(f"invalid settings: local_engine '{s.local_engine}' needs local_url (SIDECAR_LOCAL_URL)")
    if s.local_engine == "ollama" and not s.local_model and s.resolved_mode in ("local", "auto"):
        raise ConfigError("invalid settings: local_engine 'ollama' needs local_model (SIDECAR_LOCAL_MODEL), e.g. qwen2.5-coder:1.5b")
    if s.debounce_max_ms is not None and s.debounce_min_ms > s.debounce_max_ms:
        raise ConfigError(
            f"invalid settings: debounce_min_ms ({s.debounce_min_ms}) is above debounce_max_ms ({s.debounce_max_ms})"
        )
    return s


# Fields whose change needs a new backend (and so a new connection pool or engine).
BACKEND_FIELDS = (
    "provider", "mode", "api_key", "base_url", "siliconflow_region", "model", "http2",
    "connect_timeout_ms", "request_timeout_ms", "cold_start_timeout_ms",
    "local_model_path", "local_n_ctx", "local_n_gpu_layers", "local_threads",
    "local_engine", "local_url", "local_model",
    "headers", "local_api_key", "local_headers", "user", "trust_env",
)


def backend_changed(old: Settings, new: Settings) -> bool:
    """Whether going from ``old`` to ``new`` needs a new backend (``BACKEND_FIELDS``)."""
    return any(getattr(old, f) != getattr(new, f) for f in BACKEND_FIELDS)
