"""What the scheduler takes and gives: one inline completion request, its answer, and
the :class:`Upstream` it streams from.

See docs/architecture.md ("The path of a keystroke")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .inflight import StreamEnd

if TYPE_CHECKING:
    from ..config import Settings
    from .cache import CacheKey
    from .context import CompletionContext
    from .inflight import InflightStream
    from .postprocess import StreamFilter

#: Where an answer came from: a stream the request started (``stream``), joined
#: (``joined``), typed through or shown again once finished (``typed_through``,
#: ``reshown``), a speculative prefetch (``prefetch``), the cache (``cache_memory``,
#: ``cache_sqlite``), what a superseded request had (``superseded``), or what the stream
#: had at the request deadline (``deadline``).
Source = Literal[
    "stream", "joined", "typed_through", "reshown", "prefetch", "cache_memory", "cache_sqlite", "superseded", "deadline"
]


@dataclass
class Request:
    """One inline completion request as the scheduler sees it.

    ``doc_prefix``/``doc_suffix`` are the whole document before/after the cursor with
    line breaks normalized to ``\\n``; ``version`` is the LSP document version.
    """

    uri: str
    version: int
    ctx: CompletionContext
    doc_prefix: str
    doc_suffix: str
    invoked: bool
    id: int = 0
    superseded: asyncio.Event = field(default_factory=asyncio.Event)
    finished: bool = False
    t0: float = field(default_factory=time.perf_counter)
    waited_s: float = 0.0  # time spent awaiting the debounce or the backend (not sidecar work)
    upstream_s: float = 0.0  # time spent streaming, where the pipeline counts it apart (naive)
    placement: object = None  # the LSP surface's note of where the text goes (lsp/inline.py ItemPlacement)
    trace_id: str = ""
    # Whether the client renders ``sidecar/inlineCompletionUpdate`` (it said so at
    # ``initialize``). A client that does not gets only complete lines: no stub answer.
    updates: bool = True
    # The confidence gate's features of the answer shown (``gate.Features``), for labels.
    gate_features: Any = None


@dataclass
class Answer:
    """The text for one request (never empty) and where it came from."""

    text: str
    source: Source
    stream: InflightStream | None = None
    typed: str = ""


class Upstream(Protocol):
    """What the scheduler and the prefetcher need upstream: the live settings, one
    upstream stream, and facts about the backend the next stream would use. The
    completion service builds one (``upstream.BackendUpstream``, on the stream runner);
    a unit test passes a fake one."""

    @property
    def settings(self) -> Settings:
        """The live settings."""

    async def run_stream(
        self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None], waking: bool = False
    ) -> StreamEnd:
        """Run one upstream stream into ``filt``, calling ``on_delta`` on each piece of
        text; return how it ended: ``COMPLETE``, ``PARTIAL`` (cut: the token limit, the
        deadline) or ``ERROR``. ``waking``:
        the first stream to a backend that has sent nothing yet, which may be waking its
        model: until its first byte it gets ``cold_start_timeout_ms`` (coldstart.py)."""

    def recent_ttft_ms(self) -> float | None:
        """The backend's recent median TTFT (ms), None before the first."""

    def make_context(self, doc_prefix: str, doc_suffix: str, language: str) -> CompletionContext | None:
        """The windows for a speculated document, cut as a real request's would be."""

    def cache_key(self, ctx: CompletionContext) -> CacheKey:
        """The cache key of ``ctx`` on the backend and model the next stream would use."""

    def local_backend(self) -> bool:
        """Whether the next stream goes to a local engine (its prefetch budget)."""

    def backend_cold(self) -> bool:
        """No byte from the backend since it started or came back (it may be loading),
        on a backend that loads models on request."""

    def backend_silent(self) -> bool:
        """No byte from the backend since it started or came back, whatever its kind (a
        cloud's model may be waking: coldstart.py)."""

    def backend_limited(self) -> bool:
        """The backend is in a 429/503 episode (``backends/ratelimit.py``)."""

    def backend_busy(self) -> bool:
        """The backend's TTFTs say a shared engine is loaded (``load.py``)."""
