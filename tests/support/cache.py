"""The completion cache for tests: a key for a Python prefix and an opened cache on a file."""

from __future__ import annotations

from sidecar.completion.cache import CacheKey, CompletionCache


def key(prefix: str, suffix: str = "\n", model: str = "m") -> CacheKey:
    return CacheKey(backend="siliconflow:https://x/v1", model=model, language="python", prefix=prefix, suffix=suffix)


async def make(path, **kw) -> CompletionCache:
    c = CompletionCache(
        path,
        max_entries=kw.get("max_entries", 1000),
        max_bytes=kw.get("max_bytes", 1 << 24),
        ttl_s=kw.get("ttl_s", 3600),
    )
    await c.open()
    return c
