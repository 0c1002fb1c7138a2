"""Reuse before going upstream: the document's running stream, a finished one, or the
cache.

- **Join.** A running stream whose anchor the document still extends, and whose text
  agrees with what the user typed since (``InflightStream.agrees``), is followed instead
  of starting another: typing what the model is writing costs no request.
- **Typing through.** A finished stream that agrees answers the rest at once.
- **Close.** A running stream that no longer agrees is closed at once, so its socket
  closes within milliseconds and frees its slot.
- **Stalled.** A running stream with no text long after the backend usually has its
  first token takes no joiners (an empty stream "agrees" with anything typed). A local
  engine's silence is its prompt evaluation, never a stall: it ends at
  ``prefill_timeout_ms`` on its own.
- **Cache.** An entry for the request's exact windows, or one the user is typing
  through (look-back), answers without a request.

See docs/architecture.md.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Literal

from .answer import NoStream, follow
from .inflight import InflightStream
from .postprocess import clean
from .request import Answer, Request

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .cache import CacheKey, CompletionCache
    from .docstate import DocState


def stalled(s: InflightStream, ttft_ms: float | None) -> bool:
    """A running stream with no text long after the backend usually has its first token
    (2.5 times the recent median TTFT ``ttft_ms``, at least 1 s; 1 s before any TTFT
    is known: a first stream that stalls must not hold the next request, which would
    join it and wait for its deadline). A loader is exempt (it may be loading the
    model; not a cloud's waking one, which nobody waits for: coldstart.py), and so is a
    stream to a local engine (it is evaluating the prompt: a new
    stream would queue behind that evaluation in the engine, then repeat part of it)."""
    if s.done or s.first_text_at or (s.loader and not s.waking) or s.local:
        return False
    after_s = max(1.0, 2.5 * ttft_ms / 1000) if ttft_ms else 1.0
    return time.perf_counter() - s.started_at > after_s


async def reuse_stream(
    doc: DocState, req: Request, *, ttft_ms: float | None, first_line_deadline_ms: float, metrics: Metrics
) -> Answer | None | Literal[NoStream.MISS]:
    """Answer ``req`` from ``doc.stream`` when it agrees (joined, typed through or shown
    again), else close it if it runs. Returns the answer (None: the joined stream had
    nothing to show), or ``NoStream.MISS`` when a new stream is needed."""
    s = doc.stream
    if s is None:
        return NoStream.MISS
    typed = s.typed_since_anchor(req.doc_prefix, req.doc_suffix)
    if stalled(s, ttft_ms):
        metrics.count("sched.stalled_streams")
    elif typed is not None and not s.failed and s.agrees(typed):
        if s.done:
            # Typing through a shown suggestion (or asking again where it was shown).
            rem = s.remainder(typed, req.ctx)
            if rem:
                metrics.count("sched.typed_through" if typed else "sched.reshown")
                return Answer(rem, "typed_through" if typed else "reshown", s, typed)
        else:
            metrics.count("sched.joined")
            got = await follow(req, s, typed, first_line_deadline_ms=first_line_deadline_ms, metrics=metrics)
            if got is not NoStream.DIVERGED:
                return got
            metrics.count("sched.diverged")
    if not s.done and s.close():
        metrics.count("sched.streams_aborted")
    return NoStream.MISS


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
    return Answer(rem, f"cache_{hit.layer}")  # type: ignore[arg-type]


def store_stream(cache: CompletionCache, key: CacheKey, s: InflightStream, metrics: Metrics) -> None:
    """Put a finished stream's text in the cache under ``key`` (a stream cut short is
    stored as partial; a failed one not at all)."""
    if s.failed:
        return
    partial = s.outcome != "complete"
    if cache.put(key, s.text, partial=partial):
        metrics.count("cache.stored_partial" if partial else "cache.stored")
