"""Choose and build the backends that the settings describe."""

from __future__ import annotations

from typing import Any, Callable

from ..config import Settings
from ..models.select import choose as choose_local_model
from .local_engine import LocalEngineBackend
from .managed_engine import ManagedEngine
from .openai_compat import OpenAICompatBackend
from .router import RouterBackend


def build_backend(settings: Settings, on_switch: Callable[[str, str], None] | None = None) -> Any:
    """The backend for ``settings.resolved_mode``: the cloud backend, the local one, or
    (``auto`` with a cloud configured) a router that prefers local while it is healthy."""
    mode = settings.resolved_mode
    if mode == "cloud" and settings.cloud_provider is not None:
        return build_cloud(settings)
    if mode == "auto" and settings.cloud_provider is not None:
        return RouterBackend(build_local(settings), build_cloud(settings), on_switch)
    return build_local(settings)


def build_cloud(settings: Settings) -> OpenAICompatBackend:
    """SiliconFlow (``.cn`` host unless ``siliconflow_region = "com"`` or ``base_url`` is
    set; key as a Bearer token) or any OpenAI-compatible server at ``base_url`` (the
    choice: ``Settings.cloud_provider``). ``headers`` and ``user`` go with every request;
    proxy variables are honoured with ``trust_env`` (not for a loopback URL)."""
    provider = settings.cloud_provider
    base_url = settings.resolved_base_url
    if provider is None or not base_url:
        raise ValueError("no cloud backend is configured")
    name = "SiliconFlow" if provider == "siliconflow" else f"OpenAI-compatible server at {base_url}"
    return OpenAICompatBackend(
        name=name,
        kind=provider,
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


def build_local(settings: Settings) -> Any:
    """The local side: the managed llama-cpp-python engine with the model that
    ``local_model`` / ``local_model_path`` select (:mod:`sidecar.models.select`: by
    default the installed code model that fits, else the shipped SmolLM2 GGUF), or an external engine at ``local_url``: llama.cpp's ``llama-server``,
    Ollama, or any OpenAI-compatible server (vLLM, SGLang, LM Studio). An external engine
    gets only its own key (``local_api_key``, as a Bearer token) and ``local_headers``,
    never the cloud's ``api_key`` or ``headers``; the managed engine gets neither. Proxy
    variables apply to an external engine only when ``trust_env`` is on and its URL is not
    loopback."""
    engine = settings.local_engine
    if engine == "managed":
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
    url = settings.local_url
    assert url, "validated in config.build"
    model = settings.local_model or "default"
    common = dict(kind="local", base_url=url, model=model,
                  connect_timeout_ms=settings.connect_timeout_ms, read_timeout_ms=settings.request_timeout_ms,
                  api_key=settings.local_api_key, headers=dict(settings.local_headers), user=settings.user,
                  trust_env=settings.trust_env)
    ready_s = settings.cold_start_timeout_ms / 1000
    if engine == "llama-server":
        from .llama_server import LlamaServerBackend

        return LlamaServerBackend(name=f"llama-server at {url}", ready_timeout_s=ready_s, **common)
    if engine == "ollama":
        from .ollama import OllamaBackend

        return OllamaBackend(name=f"Ollama at {url}", ready_timeout_s=ready_s, **common)
    return OpenAICompatBackend(name=f"local OpenAI-compatible engine at {url}", **common)
