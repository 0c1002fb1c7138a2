"""The scheduler's upstream (``request.Upstream``) on the live backend: one stream
through the stream runner (``stream.py``), the windows a speculated document is cut to
(``context_budget.py``), and facts about the backend the next stream goes to (a router
picks a side per stream). The completion service builds it and hands it to the
scheduler and the prefetcher. See docs/architecture.md ("The path of a keystroke").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..providers import is_local
from . import crossfile
from .cache import CacheKey
from .inflight import StreamEnd

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..config import Settings
    from ..metrics import Metrics
    from .context import CompletionContext
    from .context_budget import ContextBudget
    from .postprocess import StreamFilter
    from .stream import StreamRunner


class BackendUpstream:
    """:class:`~.request.Upstream` from the stream runner and the context budget; the
    settings, the backend the next stream goes to and the metrics are the runner's
    (``StreamDeps``)."""

    def __init__(self, runner: StreamRunner, context_budget: ContextBudget) -> None:
        self.runner = runner
        self.context_budget = context_budget
        self._settings: Callable[[], Settings] = runner.deps.settings
        self._target: Callable[[], Backend] = runner.deps.target
        self._metrics: Metrics = runner.deps.metrics

    @property
    def settings(self) -> Settings:
        """The live settings."""
        return self._settings()

    async def run_stream(
        self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None], waking: bool = False
    ) -> StreamEnd:
        """One upstream stream for ``ctx`` into ``filt``, and how it ended: ``COMPLETE``,
        ``PARTIAL`` (cut, deadline) or ``ERROR``. ``waking``: see ``request.Upstream.run_stream``."""
        run = await self.runner.run(ctx, filt, on_delta, waking=waking)
        if run.error is not None:
            return StreamEnd.ERROR
        # Cut by the token limit (``finish_reason: "length"``), the deadline or a dropped
        # connection: its last line may be unfinished (inflight.py, cache.put).
        cut = run.info.truncated or run.deadline_hit or run.info.finish_reason == "length"
        return StreamEnd.PARTIAL if cut else StreamEnd.COMPLETE

    def recent_ttft_ms(self) -> float | None:
        """Median of the last 20 upstream TTFTs in ms (None before the first)."""
        xs = self._metrics.recent("upstream_ttft")[-20:]
        return statistics.median(xs) if xs else None

    def make_context(self, doc_prefix: str, doc_suffix: str, language: str) -> CompletionContext | None:
        """Windows for a speculated document, cut as a real request's would be."""
        return self.context_budget.make_context(doc_prefix, doc_suffix, language)

    def cache_key(self, ctx: CompletionContext) -> CacheKey:
        """The cache key of a context on the backend and model the next stream would use."""
        b = self._target()
        return CacheKey(
            backend=f"{b.provider}:{b.base_url}",
            model=b.model,
            language=ctx.language,
            prefix=ctx.prefix,
            suffix=ctx.suffix,
            extra=crossfile.digest(ctx.snippets, ctx.repo, ctx.path),
        )

    def local_backend(self) -> bool:
        """Whether the next stream goes to a local engine."""
        return is_local(self._target().provider)

    def backend_cold(self) -> bool:
        """True while the backend the next stream would use loads models on request
        (``Backend.loads_models``: the managed engine, llama-server, Ollama) and has sent
        no stream event since it started or came back (it may load its model on the next
        request). A cloud's silent first stream is a fault, never a load to wait for."""
        target = self._target()
        return target.loads_models and self.runner.cold(target)

    def backend_silent(self) -> bool:
        """No stream event from the backend the next stream would use since it started
        or came back, whatever its kind: a cloud's first stream may be waking a model
        (a serverless endpoint, vLLM or Ollama behind an OpenAI-compatible URL)."""
        return self.runner.cold(self._target())

    def backend_limited(self) -> bool:
        """True from a 429/503 of the backend the next stream would use until its next
        success (``backends/ratelimit.py``): speculative prefetch waits meanwhile."""
        cooldown = self._target().cooldown
        return bool(cooldown is not None and cooldown.in_episode)

    def backend_busy(self) -> bool:
        """True while the backend the next stream would use answers markedly slower than
        its idle level (``load.py``): speculative prefetch waits, prompts shrink."""
        return self.context_budget.load.busy()
