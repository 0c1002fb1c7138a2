"""Choose and build the backends that the settings describe."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncGenerator, Callable
from typing import Any

from .. import providers as P
from ..config import Settings
from ..models.select import choose as choose_local_model
from .base import Backend, StreamInfo, UpstreamRequest
from .errors import BAD_KEY, BackendError, bad_key_message, key_hint
from .local_engine import LocalEngineBackend
from .managed_engine import ManagedEngine
from .openai_compat import OpenAICompatBackend
from .router import RouterBackend


def build_backend(settings: Settings, on_switch: Callable[[str, str], None] | None = None) -> Backend:
    """The backend for ``settings.resolved_mode``: the cloud backend, the local one, or
    (``auto`` with a cloud configured) a router that prefers local while it is healthy."""
    mode = settings.resolved_mode
    if mode == "cloud" and settings.cloud_provider is not None:
        return build_cloud(settings)
    if mode == "auto" and settings.cloud_provider is not None:
        return RouterBackend(build_local(settings), build_cloud(settings), on_switch)
    return build_local(settings)


class CloudBackend(OpenAICompatBackend):
    """The cloud side: an :class:`OpenAICompatBackend` whose rejected-key message names
    the key's variable and provider actually in use (``key_hint``: ``errors.key_hint``),
    not SiliconFlow's by default."""

    def __init__(self, *, key_hint: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key_hint = key_hint

    async def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncGenerator[str, None]:
        agen = super().stream(req, info)
        try:
            async for delta in agen:
                yield delta
        except BackendError as err:
            if err.kind != BAD_KEY:
                raise
            raise dataclasses.replace(err, message=bad_key_message(self.name, err.status, self.key_hint)) from None
        finally:
            await agen.aclose()


def cloud_key_hint(settings: Settings) -> str:
    """What a rejected-key message tells the user to check: the variable that held the
    key (``SILICONFLOW_API_KEY``, ``OPENAI_API_KEY``, else ``SIDECAR_API_KEY`` and its
    other sources) and the cloud provider's own note."""
    owner = P.PROVIDERS.get(settings.api_key_for or "")
    return key_hint(settings.cloud, owner.key_env if owner is not None else None, bool(settings.api_key))


def build_cloud(settings: Settings) -> OpenAICompatBackend:
    """SiliconFlow (``.cn`` host unless ``siliconflow_region = "com"`` or ``base_url`` is
    set; key as a Bearer token) or any OpenAI-compatible server at ``base_url`` (the
    choice: ``Settings.cloud_provider``), speaking its provider's wire format
    (``Provider.api``). ``headers`` and ``user`` go with every request; proxy variables
    are honoured with ``trust_env`` (not for a loopback URL). Nothing is built, and so
    the key goes nowhere, when the configured base URL is invalid
    (``Settings.cloud_provider`` is None then)."""
    provider = settings.cloud
    base_url = settings.resolved_base_url
    if provider is None or not base_url:
        raise ValueError("no cloud backend is configured")
    # A provider with hosts of its own is named; a generic server by its URL.
    name = provider.label if provider.hosts else f"{provider.label} at {base_url}"
    return CloudBackend(
        key_hint=cloud_key_hint(settings),
        name=name,
        provider=provider.name,
        api=provider.api,
        base_url=base_url,
        model=settings.resolved_model,
        api_key=settings.api_key,
        connect_timeout_ms=settings.connect_timeout_ms,
        read_timeout_ms=settings.request_timeout_ms,
        http2=settings.http2,
        headers=dict(settings.headers),
        user=settings.user,
        trust_env=settings.trust_env,
    )


def build_local(settings: Settings) -> Backend:
    """The local side: the managed llama-cpp-python engine with the model that
    ``local_model`` / ``local_model_path`` select (:mod:`sidecar.models.select`: by
    default the installed code model that fits, else the shipped SmolLM2 GGUF), or an external engine at ``local_url``: llama.cpp's ``llama-server``,
    Ollama, or any OpenAI-compatible server (vLLM, SGLang, LM Studio). An external engine
    gets only its own key (``local_api_key``, as a Bearer token) and ``local_headers``,
    never the cloud's ``api_key`` or ``headers``; the managed engine gets neither. Proxy
    variables apply to an external engine only when ``trust_env`` is on and its URL is not
    loopback. Each ``local_engine`` has its builder (``_LOCAL_BUILDERS``)."""
    return _LOCAL_BUILDERS[settings.engine](settings)


def _managed(settings: Settings) -> LocalEngineBackend:
    choice = choose_local_model(settings.local_model, settings.local_model_path)
    managed = ManagedEngine(
        str(choice.path) if choice.path else None,
        n_ctx=settings.local_n_ctx,
        n_gpu_layers=settings.local_n_gpu_layers,
        threads=settings.local_threads,
        secrets=(settings.api_key,),
    )
    return LocalEngineBackend(
        managed,
        cold_start_timeout_ms=settings.cold_start_timeout_ms,
        read_timeout_ms=settings.request_timeout_ms,
        choice=choice,
    )


def _external(settings: Settings, **extra: Any) -> dict[str, Any]:
    """The arguments every external engine's backend takes."""
    url = settings.local_url
    assert url, "validated in config.build"
    return dict(
        name=f"{settings.engine.label} at {url}",
        provider=P.LOCAL.name,
        base_url=url,
        model=settings.local_model or "default",
        connect_timeout_ms=settings.connect_timeout_ms,
        read_timeout_ms=settings.request_timeout_ms,
        api_key=settings.local_api_key,
        headers=dict(settings.local_headers),
        user=settings.user,
        trust_env=settings.trust_env,
        **extra,
    )


def _llama_server(settings: Settings) -> Backend:
    from .llama_server import LlamaServerBackend

    return LlamaServerBackend(**_external(settings, ready_timeout_s=settings.cold_start_timeout_ms / 1000))


def _ollama(settings: Settings) -> Backend:
    from .ollama import OllamaBackend

    return OllamaBackend(**_external(settings, ready_timeout_s=settings.cold_start_timeout_ms / 1000))


def _openai_engine(settings: Settings) -> OpenAICompatBackend:
    return OpenAICompatBackend(**_external(settings))


#: ``local_engine`` -> the builder of its backend.
_LOCAL_BUILDERS: dict[P.LocalEngine, Callable[[Settings], Backend]] = {
    P.MANAGED: _managed,
    P.LLAMA_SERVER: _llama_server,
    P.OLLAMA: _ollama,
    P.OPENAI_ENGINE: _openai_engine,
}
