"""The settings, each declared once (:func:`~.declare.setting`: type, default, choices or
range, environment variables, secrecy, whether a change needs a new backend, one line of
documentation), and what is derived from them (the cloud provider, the resolved mode,
base URL, model, cache path). Times are in milliseconds, budgets in tiktoken tokens."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import platformdirs

from .. import providers as P
from ..observability import redact as _redact

# The gate's fitted defaults (one source: docs/benchmarks.md, "Confidence gate").
from . import fitted as _fitted
from .declare import is_secret_header, setting, spec_of

APP_NAME = "sidecar"

# The cloud providers' own variables. providers.py sets them on SILICONFLOW and OPENAI;
# ``Provider`` declares them optional only because ``local`` has none.
_SILICONFLOW_KEY_ENV = cast(str, P.SILICONFLOW.key_env)
_OPENAI_KEY_ENV = cast(str, P.OPENAI.key_env)
_OPENAI_BASE_URL_ENV = cast(str, P.OPENAI.base_url_env)


@dataclass(frozen=True)
class Settings:
    """Resolved settings (each field's ``doc`` says what it is; docs/configuration.md has
    the table). ``provider`` says who serves (:mod:`sidecar.providers`); ``auto`` picks
    from ``base_url`` and the key, see :attr:`cloud_provider`. The local side is
    ``local_engine``: the managed llama-cpp-python engine (by default with the shipped
    SmolLM2 GGUF) or an external one at ``local_url``."""

    # ----------------------------------------------------------- who serves
    provider: str = setting(
        "auto",
        choices=("auto", *P.PROVIDERS),
        backend=True,
        doc="who serves: `siliconflow`, `openai` (any OpenAI-compatible server at `base_url`), `local`; `auto`: a "
        "base URL on a SiliconFlow host is SiliconFlow, any other base URL is `openai` (whichever variable holds "
        "the key); a key without a base URL is SiliconFlow; else local",
    )
    mode: str | None = setting(
        None,
        choices=("auto", "cloud", "local"),
        backend=True,
        default_doc="unset: cloud if configured, else local",
        doc="where completions come from; `auto`: the local engine while it is healthy, else the cloud "
        "(see [Local GPU mode](engines.md#local-gpu-mode))",
    )
    api_key: str | None = setting(
        None,
        env=(_SILICONFLOW_KEY_ENV, "SIDECAR_API_KEY"),
        fallback_env=(_OPENAI_KEY_ENV,),
        secret=True,
        backend=True,
        doc="sent only as a Bearer token to the configured backend; never logged",
    )
    base_url: str | None = setting(
        None,
        fallback_env=(_OPENAI_BASE_URL_ENV,),
        url=True,
        backend=True,
        doc="OpenAI-compatible base URL ending in `/v1`",
    )
    siliconflow_region: str = setting(
        P.SILICONFLOW.regions[0],
        choices=P.SILICONFLOW.regions,
        backend=True,
        doc=" or ".join(f"`{r}` ({urlsplit(u).hostname})" for r, u in P.SILICONFLOW.hosts),
    )
    model: str | None = setting(
        None, backend=True, default_doc=f"`{P.SILICONFLOW.default_model}` (SiliconFlow)", doc="model id"
    )
    # ----------------------------------------------------------- the prompt
    fim: str = setting(
        "auto",
        choices=("auto", "suffix", "template", "chat", "prefix"),
        doc="the prompt strategy; `auto` lets the backend's wire format and the model decide",
    )
    token_healing: bool = setting(
        True,
        doc="a prompt that ends inside a word (or after a space, on local engines) is backed up to the word's "
        "start and the answer must begin with what was cut: a llama.cpp grammar on llama-cpp-python / "
        "llama-server, a filter on the cloud and Ollama (`completion/healing/`)",
    )
    max_tokens: int = setting(64, range=(1, 4096), doc="model tokens per completion")
    temperature: float = setting(0.2, range=(0.0, 2.0), doc="sampling temperature")
    prefix_tokens: int = setting(
        1024,
        range=(16, 32768),
        doc="largest prefix window, counted with tiktoken's cl100k (offline copy); the window cut follows "
        "`target_ttft_ms`",
    )
    suffix_tokens: int = setting(256, range=(0, 32768), doc="largest suffix window, as `prefix_tokens`")
    target_ttft_ms: int | None = setting(
        None,
        range=(0, 600000),
        default_doc="300 local, off for the cloud",
        doc="the window is a latency budget: from the engine's measured prompt speed (fixed cost + ms per new "
        "prompt token, medians of recent warm streams) the suffix window (evaluated again after every key) is "
        "the largest 64-token step from 64 up to `suffix_tokens` predicted to meet this TTFT, and the prefix "
        "window (kept in the KV cache while you type in one block) the largest 128-token step from 512 up to "
        "`prefix_tokens` whose cold prompt is predicted to meet four times it; changes at most every 30 s, "
        "with 15 % hysteresis; 0 turns it off (`completion/window.py`)",
    )
    crossfile_tokens: int | None = setting(
        None,
        range=(0, 8192),
        default_doc="256 local / 512 cloud",
        doc="snippets of other open documents (lines around their recent edits, then definitions of names used "
        "near the cursor), in the model's repository format (Qwen2.5-Coder `<|file_sep|>`, llama-server "
        "`input_extra`, a comment block otherwise), stable while you type in one 16-line block; 0 turns it "
        "off. In cloud mode these snippets go to the cloud provider too",
    )
    workspace_index: bool = setting(
        True,
        doc="index the workspace folders in the background (tree-sitter definitions and imports, BM25 over "
        "identifier chunks; `.gitignore`, vendored, generated, binary and large files skipped) and put in the "
        "prompt the definitions of names near the cursor, the outlines of the files the current file imports "
        "and the most similar code of other files, within `crossfile_tokens`; false uses open documents only",
    )
    ignore_paths: tuple[str, ...] = setting(
        (),
        doc="files never indexed nor put in a prompt, and with a cloud backend never completed in: gitignore "
        "patterns, beside the `.sidecarignore` files at each workspace folder's root and in the config file's "
        'folder (TOML `["secrets/", "*.pem"]`; in the environment a JSON array or comma-separated)',
    )
    # ----------------------------------------------------------- time and transport
    request_timeout_ms: int = setting(
        8000,
        range=(100, 600000),
        backend=True,
        doc="deadline of every LSP request and of one upstream stream; on expiry the text so far is used",
    )
    cold_start_timeout_ms: int = setting(
        120000,
        range=(1000, 1800000),
        backend=True,
        doc="how long a model load may take: the first stream on a backend that has sent nothing yet runs this "
        "long in the background",
    )
    prefill_timeout_ms: int = setting(
        30000,
        range=(100, 600000),
        doc="how long a warm local engine may evaluate a prompt before its first token: such a stream outlives "
        "its request's deadline in the background, and the suggestion follows as an update",
    )
    connect_timeout_ms: int = setting(3000, range=(50, 60000), backend=True, doc="TCP/TLS connect timeout")
    http2: bool = setting(
        False, backend=True, doc="HTTP/2 is opt-in: over HTTP/2 httpx cannot stop a stream the user no longer needs"
    )
    # ----------------------------------------------------------- the local side
    local_engine: str = setting(
        P.MANAGED.name,
        choices=tuple(P.LOCAL_ENGINES),
        backend=True,
        doc="`managed`: sidecar runs llama-cpp-python itself; the others are an engine at `local_url` "
        "(llama.cpp's llama-server, Ollama, any OpenAI-compatible server: vLLM, SGLang, LM Studio)",
    )
    local_url: str | None = setting(
        None, url=True, backend=True, doc="root URL of an external engine (llama-server, Ollama) or its `/v1` base"
    )
    local_model: str | None = setting(
        None,
        backend=True,
        default_doc="`auto`",
        doc="managed engine: a catalog name (`sidecar model list`) or `auto` (the installed code model that fits, "
        "else the shipped SmolLM2); external engine: the model name it serves (e.g. an Ollama tag)",
    )
    local_model_path: str | None = setting(
        None, backend=True, doc="a GGUF file for the managed engine (wins over `local_model`)"
    )
    local_n_ctx: int = setting(2048, range=(256, 131072), backend=True, doc="llama.cpp context (tokens)")
    local_n_gpu_layers: int | None = setting(
        None,
        range=(-1, 1000),
        backend=True,
        default_doc="all layers with a GPU build, else 0",
        doc="layers on the GPU (-1 = all)",
    )
    local_threads: int | None = setting(
        None,
        range=(1, 512),
        backend=True,
        default_doc="auto",
        doc="decode threads of the managed engine at most (auto: all CPUs up to 4, else half); fewer while other programs keep CPUs busy",
    )
    # ----------------------------------------------------------- scheduling
    scheduling: str = setting(
        "adaptive",
        choices=("adaptive", "naive"),
        doc="`naive` turns off debounce, reuse and supersede (a baseline for benchmarks)",
    )
    debounce_min_ms: int = setting(50, range=(0, 5000), doc="floor of the adaptive debounce")
    debounce_max_ms: int | None = setting(
        None, range=(0, 5000), default_doc="400 cloud, 100 local", doc="ceiling of the adaptive debounce"
    )
    first_line_deadline_ms: int = setting(
        250,
        range=(0, 60000),
        doc="answer with what has arrived this long after the first token, if the first line is not complete yet",
    )
    max_concurrent_streams: int = setting(4, range=(1, 64), doc="upstream streams open at once, across all documents")
    prefetch_enabled: bool = setting(True, env="SIDECAR_PREFETCH", doc="speculative prefetch")
    lookahead_lines: int = setting(
        1,
        range=(0, 8),
        doc="lines with text a one-line suggestion's stream reads past its end, so that the request after "
        "accepting it is answered at once from the same stream (0 turns it off; `postprocess/pipeline.py`)",
    )
    prefetch_max_concurrent: int = setting(1, range=(1, 16), doc="prefetch streams at once")
    prefetch_tokens_per_min: int | None = setting(
        None,
        range=(0, 100_000_000),
        default_doc="12,000 cloud / 200,000 local",
        doc="rolling budget of tokens spent on prefetches nobody used (a used one costs nothing against it; 0: no prefetch)",
    )
    # ----------------------------------------------------------- the cache
    cache_enabled: bool = setting(True, env="SIDECAR_CACHE", doc="the completion cache")
    cache_path: str | None = setting(
        None, default_doc="`~/.cache/sidecar/completions.sqlite3` on Linux", doc="the cache file (platform cache dir)"
    )
    cache_max_entries: int = setting(
        20000, range=(100, 10_000_000), doc="entries in the file; the memory front holds a tenth"
    )
    cache_max_bytes: int = setting(
        64 * 1024 * 1024, range=(1 << 20, 1 << 40), default_doc="64 MiB", doc="size of the file"
    )
    cache_ttl_s: int = setting(86400, range=(1, 10 * 365 * 86400), doc="entries older than this are not served")
    gate_enabled: bool = setting(
        True,
        env="SIDECAR_GATE",
        doc="the confidence gate: hold back suggestions the user is unlikely to take, learning from accepts and "
        "suggestions passed over after they were read (`completion/gate.py`). It judges suggestions that carry "
        "the model's token log-probabilities (the managed engine, OpenAI-compatible engines that return them) "
        "and shows fresh suggestions from backends that send none; fitted on the real-code corpus's tuning half "
        '(docs/benchmarks.md, "Confidence gate")',
    )
    confidence_cut_logprob: float = setting(
        0.0,
        range=(-30.0, 0.0),
        doc="the confidence cut: a multi-line suggestion ends before the first line after its first whose least "
        "sure token has a natural log-probability below this (needs a backend that sends token "
        "log-probabilities, as the gate; 0 turns it off; `completion/postprocess/confidence.py`)",
    )
    gate_threshold: float = setting(
        _fitted.DEFAULT_THRESHOLD,
        range=(0.0, 1.0),
        doc="the gate's bar: estimated chance of an accept below which nothing is shown",
    )
    gate_seen_ms: int = setting(
        _fitted.DEFAULT_SEEN_MS,
        range=(0, 60000),
        doc="a suggestion passed over teaches the gate a reject only if it was on screen at least this long (ms): "
        "one typed over sooner was not read (`completion/acceptance.py`)",
    )
    retained_short_s: float = setting(
        30.0, range=(0.1, 86400.0), doc="seconds after an accept at which retained characters are first counted"
    )
    retained_long_s: float = setting(
        120.0, range=(0.1, 86400.0), doc="seconds after an accept at which retained characters are counted again"
    )
    # ----------------------------------------------------------- observability
    log_level: str = setting(
        "warning",
        choices=("debug", "info", "warning", "error"),
        doc="logs go to stderr and the JSON-lines file, never stdout",
    )
    log_file: str | None = setting(None, default_doc="platform log dir", doc="JSON-lines log path, or `off`")
    prometheus_port: int | None = setting(
        None, range=(1, 65535), default_doc="off", doc="serve `/metrics` on 127.0.0.1"
    )
    latency_warn_ms: int = setting(1500, range=(50, 600000), doc="p90 TTFT that triggers the one-time slowness message")
    # ----------------------------------------------------------- shared backends
    # docs/backends.md "Rate limits and shared backends". Header tables are
    # ((name, value), ...) so that Settings stays hashable.
    headers: tuple[tuple[str, str], ...] = setting(
        (),
        secret=True,
        backend=True,
        doc='extra HTTP headers for the cloud / OpenAI-compatible backend, e.g. `{"X-Team": "infra"}` (a JSON '
        "object in the variable, a TOML table in the config file)",
    )
    local_api_key: str | None = setting(
        None,
        secret=True,
        backend=True,
        doc="Bearer key for an external local engine (`llama-server --api-key`, Ollama behind a gateway); the "
        "cloud key never goes there",
    )
    local_headers: tuple[tuple[str, str], ...] = setting(
        (), secret=True, backend=True, doc="extra headers for an external local engine"
    )
    user: str | None = setting(
        None,
        backend=True,
        doc="end-user id sent as `user` in OpenAI-shaped request bodies (per-user accounting on a shared gateway)",
    )
    trust_env: bool = setting(
        True,
        backend=True,
        doc="honour `HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, `NO_PROXY` and `SSL_CERT_FILE`; loopback URLs "
        "(the embedded engine, `127.0.0.1`, `localhost`) never use a proxy",
    )
    #: Internal: the provider whose own variable held the API key (``SILICONFLOW_API_KEY``:
    #: siliconflow, ``OPENAI_API_KEY``: openai), None when it came from elsewhere. Only a
    #: provider without a host of its own changes detection (its key alone configures
    #: nothing); SiliconFlow's only feeds :attr:`provider_note`, never the request shape.
    api_key_for: str | None = setting(None, internal=True, doc="which provider's variable held the key")
    #: Internal: set when the base URL a source gave is not a valid URL (the message
    #: that reported it, naming the value and its source). Then there is no cloud
    #: backend at all (:attr:`cloud_provider` is None): the key was meant for that URL,
    #: so it never goes to SiliconFlow's default host or to a base URL of a lower layer.
    #: A layer's valid ``base_url`` clears it and its ``base_url_error`` clears a lower
    #: layer's ``base_url`` (``load.build``).
    base_url_error: str | None = setting(
        None, internal=True, backend=True, doc="why the configured base URL was refused"
    )

    def __post_init__(self) -> None:
        # Every configured key is redacted from logs, messages and errors from now on.
        for name, value in self._secrets():
            if name is None or is_secret_header(name):
                _redact.register_secret(value)

    def _secrets(self) -> list[tuple[str | None, str]]:
        """Secret values as ``(header name or None, value)``."""
        out: list[tuple[str | None, str]] = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if spec_of(f).secret and value:
                out.extend(value if isinstance(value, tuple) else [(None, value)])
        return out

    # ------------------------------------------------------------------ derived
    @property
    def cloud_provider(self) -> str | None:
        """The cloud side: ``siliconflow`` or ``openai``, or None when nothing is configured.

        A ``provider`` of ``siliconflow`` or ``openai`` is taken as set, whatever the URL.
        With ``provider = "auto"``: a ``base_url`` on a SiliconFlow host
        (``siliconflow.cn``, ``siliconflow.com`` or a subdomain: ``Provider.owns_url``) is
        ``siliconflow``; any other ``base_url`` is ``openai``, whichever variable the key
        came from (``SILICONFLOW_API_KEY`` included): SiliconFlow's request shape (native
        FIM ``suffix``, its default model) is never sent to a host that is not SiliconFlow
        unless ``provider`` says so (``SIDECAR_PROVIDER=siliconflow``).
        Without a ``base_url`` a key (``SIDECAR_API_KEY``, ``SILICONFLOW_API_KEY``, the
        config file, the editor) means SiliconFlow's own host, except a key from
        ``OPENAI_API_KEY``, which alone configures nothing (it is never sent to SiliconFlow).
        A base URL that was set but is invalid (:attr:`base_url_error`) means no cloud,
        whatever the provider and the key: the key is sent only to the URL the user set.
        """
        if self.base_url_error:
            return None
        if self.provider in P.PROVIDERS:
            chosen = P.PROVIDERS[self.provider]
            return chosen.name if chosen.cloud else None
        if self.base_url:
            return P.provider_for_url(self.base_url).name
        key_owner = P.PROVIDERS.get(self.api_key_for or "", P.KEY_ALONE)
        if self.api_key and key_owner.hosts:  # a key alone needs a provider with a host of its own
            return key_owner.name
        return None

    @property
    def cloud(self) -> P.Provider | None:
        """:attr:`cloud_provider` as a :class:`~sidecar.providers.Provider`."""
        name = self.cloud_provider
        return P.PROVIDERS[name] if name else None

    @property
    def provider_note(self) -> str | None:
        """One sentence for a setup that may expect SiliconFlow's shape but does not get it:
        the key comes from ``SILICONFLOW_API_KEY``, ``provider`` is ``auto`` and the base
        URL is not a SiliconFlow host, so requests take the OpenAI-compatible shape. None
        otherwise. ``sidecar doctor`` and the server's start-up log show it."""
        key_owner = P.PROVIDERS.get(self.api_key_for or "")
        if (
            self.provider in P.PROVIDERS
            or not self.base_url
            or not self.api_key
            or key_owner is None
            or not key_owner.domains
            or key_owner.owns_url(self.base_url)
        ):
            return None
        host = urlsplit(self.base_url).hostname or self.base_url
        return (
            f"the key comes from {key_owner.key_env} but {host} is not a {key_owner.label} host, so requests use "
            f'the OpenAI-compatible shape; set SIDECAR_PROVIDER={key_owner.name} (provider = "{key_owner.name}") '
            f"to send {key_owner.label}'s"
        )

    @property
    def resolved_mode(self) -> str:
        """``cloud``, ``local`` or ``auto``. Unset: cloud when a cloud backend is
        configured (a key or a base URL), else local."""
        if self.mode:
            return self.mode
        return "local" if self.cloud_provider is None else "cloud"

    @property
    def resolved_provider(self) -> str:
        """The provider requests go to first: the cloud provider, or ``local``."""
        if self.resolved_mode in ("local", "auto") or self.cloud_provider is None:
            return P.LOCAL.name
        return self.cloud_provider

    @property
    def resolved_base_url(self) -> str | None:
        """Base URL ending in ``/v1`` (no trailing slash), or None for the embedded engine."""
        cloud = self.cloud
        if cloud is None:
            return None
        if self.base_url:
            return self.base_url.rstrip("/")
        return cloud.host(self.siliconflow_region)

    @property
    def resolved_model(self) -> str:
        if self.model:
            return self.model
        cloud = self.cloud
        return (cloud.default_model if cloud else None) or "default"

    @property
    def engine(self) -> P.LocalEngine:
        """``local_engine`` as a :class:`~sidecar.providers.LocalEngine`."""
        return P.LOCAL_ENGINES[self.local_engine]

    @property
    def resolved_cache_path(self) -> Path:
        """``cache_path``, or ``<platform cache dir>/sidecar/completions.sqlite3``."""
        if self.cache_path:
            return Path(self.cache_path).expanduser()
        return Path(platformdirs.user_cache_dir(APP_NAME)) / "completions.sqlite3"

    def public_dict(self) -> dict[str, Any]:
        """Settings as a dict with secrets redacted (safe to log or send to the editor)."""
        d = dataclasses.asdict(self)
        for f in dataclasses.fields(self):
            if spec_of(f).secret:
                value = getattr(self, f.name)
                d[f.name] = (
                    {n: ("***" if is_secret_header(n) else v) for n, v in value}
                    if isinstance(value, tuple)
                    else "***"
                    if value
                    else None
                )
        d["resolved_mode"] = self.resolved_mode
        d["resolved_provider"] = self.resolved_provider
        d["resolved_base_url"] = self.resolved_base_url
        d["resolved_model"] = self.resolved_model
        d["resolved_cache_path"] = str(self.resolved_cache_path)
        return d
