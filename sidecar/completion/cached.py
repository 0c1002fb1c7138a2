"""The completion cache on the request path (step 3 of ``scheduler.py``): an entry for
the request's exact windows, or one the user is typing through (look-back), answers
without going upstream; every finished stream's text goes in. The cache itself is
``cache/``. See docs/architecture.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .inflight import InflightStream, StreamEnd
from .postprocess import clean
from .request import Answer, Request

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .cache import CacheKey, CompletionCache


async def from_cache(cache: CompletionCache, key: CacheKey, req: Request, metrics: Metrics) -> Answer | None:
    """The cache's answer for ``req`` under ``key`` (``sched.cache_hits.<layer>``), or
    None. A multi-line entry the user is typing through keeps its lines."""
    hit = await cache.lookup(key)
    if hit is None:
        return None
    keep_lines = True if hit.typed and "\n" in hit.text.lstrip("\n") else None
    rem = clean(hit.text[hit.typed :], req.ctx, multiline=keep_lines)
    if not rem:
        return None
    metrics.count(f"sched.cache_hits.{hit.layer}")
    return Answer(rem, "cache_sqlite" if hit.layer == "sqlite" else "cache_memory")


def store_stream(cache: CompletionCache, key: CacheKey, s: InflightStream, metrics: Metrics) -> None:
    """Put a finished stream's text in the cache under ``key`` (a stream cut short is
    stored as partial; a failed one not at all)."""
    if s.failed:
        return
    partial = s.end is not StreamEnd.COMPLETE
    if cache.put(key, s.text, partial=partial):
        metrics.count("cache.stored_partial" if partial else "cache.stored")
