"""Speculative prefetch: the next suggestion is ready before the user asks.

Two speculations, both assuming the user takes what is shown:

- **after a suggestion is shown** (its stream has ended): the completion that follows
  accepting it, at the document prefix plus the suggestion;
- **after an accepted suggestion ends a line**: the next line, at the prefix plus the
  accepted text, a line break and the indentation the next line will likely have.

A prefetch is an ordinary upstream stream anchored at the speculated document text: a
later request that agrees with it joins it (or, once it has ended, is answered from it),
and its text goes to the cache under the key the real request will compute (the windows
are cut by the same function), so the user's next request is a hit.

Budget, in order of precedence:
- prefetch is off when ``prefetch_enabled`` is false;
- it runs at lower priority than user requests: at most ``prefetch_max_concurrent``
  (default 1) at once, never in the last free upstream slot, and a user stream that
  finds no free slot cancels running prefetches first;
- it is cancelled as soon as a request shows the user diverged from the speculated text;
- it respects a rolling per-minute budget of *speculative* tokens
  (``prefetch_tokens_per_min``; by default 12,000 for cloud backends, about eleven
  prefetches of a 1,000-token prompt, and 200,000 for a local engine; 0: none), reserving the prompt's estimated
  tokens (cl100k) plus ``max_tokens`` before it starts, and giving back what it did not
  use when it ends (the prompt and the generated tokens of a prefetch nobody used stay
  spent). A prefetch that came true gives back all of it: it answered a request the user
  made, which would have cost a stream of its own, so it spent nothing extra. A prefetch
  the cache answered costs nothing either. The budget thus caps the waste (tokens
  nobody saw), not the speculation that pays;
- it pauses while the backend is rate-limited (``prefetch.skipped_limited``) or busy
  (``prefetch.skipped_load``, ``load.py``).

:class:`Prefetcher` does this for the scheduler; the scheduler adopts a prefetch that
came true (``doc.prefetch``). See docs/architecture.md.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from . import tokens
from .inflight import InflightStream, StreamEnd
from .request import Answer, Request, Upstream

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .cache import CompletionCache
    from .context import CompletionContext
    from .postprocess import StreamFilter
    from .session import DocSession
    from .slots import StreamSlots

log = logging.getLogger(__name__)

CLOUD_TOKENS_PER_MIN = 12_000
LOCAL_TOKENS_PER_MIN = 200_000


class TokenBudget:
    """A rolling 60-second budget of tokens (prompt plus generated)."""

    def __init__(self, per_min: int) -> None:
        self.per_min = per_min
        self._spent: deque[list[float]] = deque()  # [monotonic time (s), tokens]

    def used(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        while self._spent and now - self._spent[0][0] > 60.0:
            self._spent.popleft()
        return int(sum(n for _, n in self._spent))

    def try_reserve(self, tokens: int) -> list[float] | None:
        """Reserve ``tokens`` if they fit in the last minute's budget; the reservation
        (for :meth:`settle`), or None when they do not fit."""
        now = time.monotonic()
        if self.used(now) + tokens > self.per_min:
            return None
        entry = [now, float(tokens)]
        self._spent.append(entry)
        return entry

    @staticmethod
    def settle(entry: list[float], tokens: int) -> None:
        """The reserved stream is over and cost ``tokens``: what it reserved and did not
        use (most of ``max_tokens``) goes back to the budget."""
        entry[1] = float(min(entry[1], tokens))


def next_line_indent(line: str) -> str:
    """Indentation for the line after ``line``: the same, one level deeper after a line
    that opens a block (``:``, ``{``, ``(``, ``[``)."""
    indent = line[: len(line) - len(line.lstrip())]
    if line.rstrip().endswith((":", "{", "(", "[")):
        unit = "\t" if indent.startswith("\t") else "    "
        indent += unit
    return indent


class Prefetcher:
    """Speculative prefetch for the scheduler's documents (see the module doc).

    ``docs`` is the scheduler's per-document state (``doc.prefetch`` is each document's
    prefetch); ``upstream`` the scheduler's :class:`~.request.Upstream`; ``slots`` the
    stream slots it shares with user streams; ``on_end(stream)`` stores a finished
    stream's text in the cache."""

    def __init__(
        self,
        upstream: Upstream,
        docs: dict[str, DocSession],
        slots: StreamSlots,
        metrics: Metrics,
        cache: CompletionCache | None,
        on_end: Callable[[InflightStream], None],
    ) -> None:
        self.upstream = upstream
        self._docs = docs
        self.slots = slots
        self.metrics = metrics
        self._cache = cache
        self._on_end = on_end
        self._budget: TokenBudget | None = None
        # The documents' prefetches: their reservations and prompt tokens.
        self._reserved: dict[InflightStream, tuple[list[float], int]] = {}

    def adopt(self, doc: DocSession, req: Request) -> Answer | None:
        """Use ``doc``'s prefetch for ``req`` if the user typed into what it speculated:
        a finished one answers at once (an ``Answer`` from ``prefetch``); a running one
        is joined. Either way it becomes the document's user stream (``doc.stream``:
        typing through it goes on from there, and the prefetch slot is free for the next
        speculation). A prefetch the user went away from is dropped. Returns the answer
        or None."""
        p = doc.prefetch
        if p is None:
            return None
        typed = p.match(req.doc_prefix, req.doc_suffix)
        if typed is not None and (p.text or not p.done):
            rem = p.remainder(typed, req.ctx) if p.done else ""
            if p.done and not rem:
                return None  # typed through to its end: it showed nothing (not used)
            if not p.used:
                p.used = True
                self.metrics.count("prefetch.used")
            self._refund(p)
            # The speculation came true: it becomes the user stream.
            doc.prefetch = None
            doc.replace_stream(p)
            if rem:
                return Answer(rem, "prefetch", p, typed)
        elif not (p.doc_suffix == req.doc_suffix and p.doc_prefix.startswith(req.doc_prefix)):
            self.drop(doc, "diverged")  # the user went another way
        return None

    def speculate(self, uri: str, doc_prefix: str, doc_suffix: str, language: str, why: str) -> None:
        """Start a prefetch at the speculated document text, if the budget allows."""
        st = self.upstream.settings
        doc = self._docs.get(uri)
        if doc is None or not st.prefetch_enabled:
            return
        if self.upstream.backend_limited():
            self.metrics.count("prefetch.skipped_limited")  # the user's own requests first
            return
        if self.upstream.backend_busy():
            self.metrics.count("prefetch.skipped_load")  # a shared engine under load (load.py)
            return
        if doc.stream is not None and doc.stream.covers(doc_prefix, doc_suffix):
            self.metrics.count("prefetch.skipped_covered")  # the lookahead has it (inflight.py)
            log.debug("prefetch %s skipped: the document's stream covers it", why)
            return
        p = doc.prefetch
        if p is not None:
            typed = p.typed_since_anchor(doc_prefix, doc_suffix)
            if typed == "" or p.covers(doc_prefix, doc_suffix):
                log.debug("prefetch %s skipped: the prefetch holds it", why)
                return  # the running or finished prefetch already holds (or tried) this
            if why == "next_line" and typed is not None and not typed.strip() and not p.failed and p.reach:
                # The prefetch at the end of the accepted line is the model's own view of
                # what follows it (the next line, or a blank one): the request right after
                # the accept needs it, and a guessed indentation must not replace it. One
                # that failed or ended with nothing is replaced.
                self.metrics.count("prefetch.skipped_line_end")
                log.debug("prefetch %s skipped: the prefetch at the line end answers it", why)
                return
        live = sum(1 for d in self._docs.values() if d.prefetch is not None and not d.prefetch.done and d is not doc)
        if live >= st.prefetch_max_concurrent or (self.slots.active_user + live >= st.max_concurrent_streams - 1):
            self.metrics.count("prefetch.skipped_busy")
            log.debug("prefetch %s skipped: no free slot", why)
            return
        ctx = self.upstream.make_context(doc_prefix, doc_suffix, language)
        if ctx is None:
            return
        prompt = tokens.count(ctx.prefix) + tokens.count(ctx.suffix)
        estimate = prompt + st.max_tokens
        reserved = self.budget().try_reserve(estimate)
        if reserved is None:
            self.metrics.count("prefetch.skipped_budget")
            log.debug(
                "prefetch %s skipped: budget (%d of %d tokens a minute spent)",
                why,
                self.budget().used(),
                self.budget().per_min,
            )
            return
        self.drop(doc, "replaced")
        s = InflightStream(uri, ctx, doc_prefix, doc_suffix, st.confidence_cut_logprob or None, st.lookahead_lines)
        self._reserved[s] = (reserved, prompt)
        doc.prefetch = s
        self.metrics.count("prefetch.issued")
        self.metrics.count(f"prefetch.issued.{why}")
        log.debug("prefetch %s issued: %d prompt tokens, at offset %d", why, prompt, len(doc_prefix))
        self.metrics.count("prefetch.tokens_reserved", estimate)
        s.run(lambda filt, on_delta: self._run(ctx, filt, on_delta), lambda s: self._ended(s, reserved, prompt))

    def budget(self) -> TokenBudget:
        """The rolling token budget for the backend kind the next stream goes to."""
        st = self.upstream.settings
        per_min = st.prefetch_tokens_per_min
        if per_min is None:  # 0 is a budget too: no prefetch
            per_min = LOCAL_TOKENS_PER_MIN if self.upstream.local_backend() else CLOUD_TOKENS_PER_MIN
        if self._budget is None or self._budget.per_min != per_min:
            self._budget = TokenBudget(per_min)
        return self._budget

    async def _run(self, ctx: CompletionContext, filt: StreamFilter, on_delta: Callable[[], None]) -> StreamEnd:
        if self._cache is not None:
            hit = await self._cache.lookup(self.upstream.cache_key(ctx))
            if hit is not None and hit.typed == 0:
                self.metrics.count("prefetch.skipped_cached")
                return StreamEnd.CACHED
        async with self.slots.prefetch():
            return await self.upstream.run_stream(ctx, filt, on_delta)

    def _ended(self, s: InflightStream, reserved: list[float], prompt: int) -> None:
        generated = tokens.count(s.filter.raw) if s.filter.raw else 0
        if s.end is not StreamEnd.CACHED:
            self.metrics.count("prefetch.tokens_generated", generated)
        # What it wasted: its prompt and what it generated, unless it answered the user
        # (or the cache had it).
        TokenBudget.settle(reserved, 0 if s.used or s.end is StreamEnd.CACHED else prompt + generated)
        self._on_end(s)

    def _refund(self, s: InflightStream) -> None:
        """``s`` answered a request the user made: its tokens leave the waste budget."""
        held = self._reserved.pop(s, None)
        if held is not None:
            reserved, prompt = held
            # What it would have cost: a finished one's settled tokens; a running one's prompt.
            self.metrics.count(
                "prefetch.tokens_refunded", int(reserved[1]) if s.done else min(prompt, int(reserved[1]))
            )
            TokenBudget.settle(reserved, 0)

    def drop(self, doc: DocSession, why: str) -> None:
        """Close ``doc``'s prefetch (if any) and count why (``prefetch.cancelled.<why>``)."""
        p, doc.prefetch = doc.prefetch, None
        if p is None:
            return
        self._reserved.pop(p, None)
        if p.close():
            self.metrics.count("prefetch.cancelled")
            self.metrics.count(f"prefetch.cancelled.{why}")
        if not p.used and p.end is not StreamEnd.CACHED:
            self.metrics.count("prefetch.wasted")

    def cancel_all(self) -> None:
        """Close every running prefetch: a user stream needs the slot."""
        for d in self._docs.values():
            if d.prefetch is not None and not d.prefetch.done:
                self.drop(d, "user_priority")
