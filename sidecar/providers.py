"""Who serves completions, and the local engines sidecar can use: the one place their
names are spelled. The bottom layer: it imports nothing from sidecar.

Two words, one meaning each:

- **provider**: who serves. ``siliconflow`` (SiliconFlow's hosted API), ``openai`` (any
  OpenAI-compatible server at ``base_url``) or ``local`` (a local engine). It is
  ``Settings.provider`` (with ``auto``), ``Settings.cloud_provider``,
  ``Backend.provider`` and the ``provider`` of the ``sidecar/status`` payload.
- **api**: the wire format a backend speaks (``Backend.api``: ``siliconflow``,
  ``openai``, ``llama-cpp-python``, ``llama-server``, ``ollama``); each one is a dialect
  in ``completion/dialects.py``. A provider's backend speaks :attr:`Provider.api`.

Code compares neither by spelling: it reads a :class:`Provider` or :class:`LocalEngine`
from the tables here (``PROVIDERS``, ``LOCAL_ENGINES``) and asks its attributes.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Provider:
    """One provider. ``label`` names it to users. ``api``: the wire format of its
    backend (None for ``local``: each engine has its own). ``hosts``: its own base URLs
    by region, ``(region, URL ending in /v1)``, the first being the default; a provider
    without hosts is reached only at a configured ``base_url``. ``domains``: the hosts
    it owns (a base URL there is this provider's). ``default_model``: the model used
    when none is set. ``needs_key``: it refuses requests without an API key.
    ``key_env`` / ``base_url_env``: the provider's own environment variables for the
    key and the base URL, if it has them. ``cloud``: it is a cloud side (not ``local``).
    ``key_note``: what else to check when it rejects a key (after the key's variable)."""

    name: str
    label: str
    api: str | None = None
    hosts: tuple[tuple[str, str], ...] = ()
    domains: tuple[str, ...] = ()
    default_model: str | None = None
    needs_key: bool = False
    key_env: str | None = None
    base_url_env: str | None = None
    cloud: bool = True
    key_note: str | None = None

    def owns_url(self, url: str) -> bool:
        """True when ``url``'s host is one of :attr:`domains` or a subdomain of one."""
        host = (urlsplit(url).hostname or "").rstrip(".").lower()
        return any(host == d or host.endswith("." + d) for d in self.domains)

    def host(self, region: str) -> str | None:
        """The base URL of this provider's own host in ``region``, or None."""
        return dict(self.hosts).get(region)

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(r for r, _url in self.hosts)


SILICONFLOW = Provider(
    "siliconflow",
    "SiliconFlow",
    api="siliconflow",
    hosts=(("cn", "https://api.siliconflow.cn/v1"), ("com", "https://api.siliconflow.com/v1")),
    domains=("siliconflow.cn", "siliconflow.com"),
    default_model="Qwen/Qwen2.5-Coder-7B-Instruct",
    needs_key=True,
    key_env="SILICONFLOW_API_KEY",
    key_note="that the key belongs to this host (.cn keys work only with api.siliconflow.cn, .com keys with .com)",
)
OPENAI = Provider(
    "openai", "OpenAI-compatible server", api="openai", key_env="OPENAI_API_KEY", base_url_env="OPENAI_BASE_URL"
)
LOCAL = Provider("local", "local engine", cloud=False)

PROVIDERS: dict[str, Provider] = {p.name: p for p in (SILICONFLOW, OPENAI, LOCAL)}
#: The cloud providers, the one with its own hosts first.
CLOUD_PROVIDERS: tuple[Provider, ...] = tuple(p for p in PROVIDERS.values() if p.cloud)
#: Who a ``base_url`` belongs to when no provider is set and no domain claims it.
GENERIC = OPENAI
#: Who a key alone (no ``base_url``, no provider) is for: the provider with a host of its own.
KEY_ALONE = SILICONFLOW


def provider_for_url(url: str) -> Provider:
    """The cloud provider a base URL belongs to: the one whose domain it is on, else the
    generic OpenAI-compatible one."""
    return next((p for p in CLOUD_PROVIDERS if p.owns_url(url)), GENERIC)


def provider_for_key_env(var: str | None) -> Provider | None:
    """The provider whose own key variable ``var`` is (``SILICONFLOW_API_KEY``,
    ``OPENAI_API_KEY``), or None."""
    return next((p for p in PROVIDERS.values() if var and p.key_env == var), None)


@dataclass(frozen=True)
class LocalEngine:
    """One value of the ``local_engine`` setting. ``label`` names it in a backend's name
    (``"{label} at {url}"``). ``managed``: sidecar runs it (llama-cpp-python, no
    ``local_url``). ``model_example``: set for an engine that serves only the model it is
    asked for by name, so ``local_model`` is required (an example name for the message)."""

    name: str
    label: str
    managed: bool = False
    model_example: str | None = None

    @property
    def needs_model(self) -> bool:
        return self.model_example is not None


MANAGED = LocalEngine("managed", "local engine (llama-cpp-python)", managed=True)
LLAMA_SERVER = LocalEngine("llama-server", "llama-server")
OLLAMA = LocalEngine("ollama", "Ollama", model_example="qwen2.5-coder:1.5b")
OPENAI_ENGINE = LocalEngine("openai", "local OpenAI-compatible engine")

LOCAL_ENGINES: dict[str, LocalEngine] = {e.name: e for e in (MANAGED, LLAMA_SERVER, OLLAMA, OPENAI_ENGINE)}


def is_local(provider: str) -> bool:
    """Whether provider ``provider`` (a ``Backend.provider``) is a local engine, not a cloud."""
    return not PROVIDERS[provider].cloud
