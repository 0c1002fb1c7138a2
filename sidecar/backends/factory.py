"""Choose and build the backend that the settings describe."""

from __future__ import annotations

from ..config import Settings
from .local_engine import LocalEngineBackend, ManagedEngine
from .openai_compat import OpenAICompatBackend


def build_backend(settings: Settings):
    """Return a backend for ``settings.resolved_provider``:

    - ``siliconflow``: SiliconFlow's OpenAI-compatible API (``.cn`` host unless
      ``siliconflow_region = "com"`` or ``base_url`` is set), key as a Bearer token;
    - ``openai``: any OpenAI-compatible server at ``base_url``;
    - ``local``: the managed llama-cpp-python engine (embedded SmolLM2 by default).
    """
    provider = settings.resolved_provider
    if provider == "local":
        engine = ManagedEngine(
            settings.local_model_path,
            n_ctx=settings.local_n_ctx,
            n_gpu_layers=settings.local_n_gpu_layers,
            threads=settings.local_threads,
        )
        return LocalEngineBackend(
            engine,
            cold_start_timeout_ms=settings.cold_start_timeout_ms,
            read_timeout_ms=settings.request_timeout_ms,
        )
    base_url = settings.resolved_base_url
    if not base_url:  # pragma: no cover - resolved_provider guarantees one
        raise ValueError("no base URL for provider " + provider)
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
    )
