"""Cutting the prompt's context for the backend the next stream goes to.

- **Windows** (``windows``): the prefix/suffix token windows, the latency budget's
  choice for that backend and model (``window.py``, fed by ``observe`` after each
  stream), at most the settings', and halved while the backend is busy
  (``load.windows_under_load``; ``load.LoadTracker`` says busy, from each warm
  stream's time to first token: ``stream_record.py``).
- **Other files** (``add_crossfile``): snippets of the other open documents
  (``crossfile/``) under ``crossfile_tokens``; none while the backend is busy.
- **Speculated documents** (``make_context``): cut exactly as a real request's would be,
  so the cache key a prefetch stores under is the one the real request looks up.

See docs/architecture.md ("What the model sees").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..backends.engine_start import warmup_prompt
from ..providers import is_local
from . import crossfile, load, tokens, window
from .context import CompletionContext, NotCompletable, build_context
from .load import LoadTracker, backend_key
from .prompt_cost import prompt_text
from .prompts.eol import line_break_lift

#: The suffix window at the end of a finished line at a new place (``ContextBudget.cut``), in tokens.
EOL_SUFFIX_TOKENS = 256
#: A document changed this recently (seconds) is being typed in (``ContextBudget.cut``).
TYPING_S = 2.0

if TYPE_CHECKING:
    from ..backends.base import Backend, StreamInfo, UpstreamRequest
    from ..backends.managed_engine import ManagedEngine
    from ..config import Settings
    from ..metrics import Metrics


def _blank_line(ctx: CompletionContext) -> bool:
    """The cursor is on a line with nothing but indentation (a blank-line hole)."""
    return not ctx.line_prefix.strip() and not ctx.line_suffix.strip()


def _warmup_tokens(engine: ManagedEngine) -> int:
    """cl100k tokens of the managed engine's warm-up prompt (the waiting request's, or
    ``engine_start.warmup_prompt``)."""
    text = getattr(engine, "warmup_text", None)
    return max(1, tokens.count(text if isinstance(text, str) else warmup_prompt()))


class ContextBudget:
    """Cuts the windows for the backend the next stream goes to (``target()``), under
    the live ``settings()``: the window budget per backend and model is its own; whether
    that backend is busy comes from ``load_tracker`` (``load.LoadTracker``), whether a
    document is being typed in from ``typing(uri)`` (the scheduler's cadence), and the
    other open documents' snippets from ``crossfile`` (the LSP surface's, None without
    one)."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        target: Callable[[], Backend],
        metrics: Metrics,
        crossfile: crossfile.CrossFileContext | None = None,
        *,
        load_tracker: LoadTracker | None = None,
        typing: Callable[[str], bool] | None = None,
    ) -> None:
        self._settings = settings
        self._target = target
        self.metrics = metrics
        self.crossfile = crossfile
        self.load = load_tracker if load_tracker is not None else LoadTracker(target)
        self._typing_in = typing or (lambda _uri: False)
        self._windows: dict[str, window.WindowBudget] = {}  # per backend and model

    def make_context(
        self, doc_prefix: str, doc_suffix: str, language: str, uri: str | None = None
    ) -> CompletionContext | None:
        """Windows for a speculated document (``\n`` line breaks), cut exactly as a real
        request's would be (window sizes, other files' snippets for ``uri``, by default
        the document of the last request), so the cache key matches; None when not
        completable."""
        try:
            ctx = self.cut(doc_prefix + doc_suffix, len(doc_prefix), language)
        except NotCompletable:
            return None
        uri = uri or (self.crossfile.focus if self.crossfile else None)
        return self.add_crossfile(ctx, uri, doc_prefix.count("\n")) if uri else ctx

    def cut(
        self, text: str, offset: int, language: str, cursor_line: int | None = None, uri: str | None = None
    ) -> CompletionContext:
        """The windows around ``offset`` of ``text`` (``build_context``) at the sizes of
        :meth:`windows`, except at the end of a finished line (where the prompt gets the
        line-break lift, ``prompts/eol.py``) or on a blank line, in a document ``uri``
        that is not being typed in (no change for ``TYPING_S``: the user opened it or
        moved there). There the suffix window is ``suffix_tokens`` at most
        ``EOL_SUFFIX_TOKENS``: what comes next is a new line, and what follows the cursor
        tells the model which line is still missing. A new place costs the whole prompt
        anyway, which the window budget prices against its cold target (``window.py``).

        Blank lines, measured on the real-code corpus's tuning half (40 blank-line holes,
        Qwen2.5-Coder-0.5B, gate off, docs/benchmarks.md "Blank lines"): exact first line
        8/40 with the budget's window, 13/40 with the 256-token suffix, a plain FIM client
        (1,000 characters of suffix) 12/40.

        Measured: in-process on the quality fixtures' end-of-line holes (Qwen2.5-Coder-0.5B,
        80 holes, two seeds) the exact first line was 18 of 80 with a 64-token suffix, 24 with
        256 tokens, a plain FIM client with 1,000 characters 22. While typing the larger
        suffix costs every key at a line end: applied there too, ``scripts/demo`` (0.5B, 2
        cores) went from a p90 time to suggestion of 11 ms to 4.4 s (line-end pauses of 7.5
        and 3.1 s), so typing keeps the budget's window.

        Raises ``NotCompletable`` as ``build_context`` does."""
        pre, suf = self.windows()
        ctx = build_context(text, offset, language, pre, suf, cursor_line=cursor_line)
        eol = min(self._settings().suffix_tokens, EOL_SUFFIX_TOKENS)
        if suf < eol and not self._typing(uri) and (line_break_lift(ctx, "template") or _blank_line(ctx)):
            self.metrics.count("context.eol_suffix")
            ctx = build_context(text, offset, language, pre, eol, cursor_line=cursor_line)
        return ctx

    def _typing(self, uri: str | None) -> bool:
        """A change in ``uri`` within ``TYPING_S`` (``typing(uri)``, the scheduler's
        cadence of the document; no ``uri``: a speculation, typing)."""
        return True if uri is None else self._typing_in(uri)

    def windows(self) -> tuple[int, int]:
        """``(prefix_tokens, suffix_tokens)`` to cut now: the latency budget's choice for
        the backend the next stream would use (``window.py``), at most the settings',
        halved while that backend is busy (``load.windows_under_load``)."""
        s = self._settings()
        b = self._target()
        budget = self._windows.setdefault(backend_key(b), window.WindowBudget())
        engine = b.engine
        target = window.target_ms(s.target_ttft_ms, is_local(b.provider))
        if engine is not None and target > 0 and budget.prior_ms_per_token is None:
            if engine.warmup_ms:
                # The managed engine's warm-up prompt measured this machine and model once
                # (window.py, "Prior"): the session's first prompts are sized by it.
                budget.set_prior(engine.warmup_ms / _warmup_tokens(engine))
            else:
                # Still starting: nothing measured yet, and its first prompt waits for the
                # model load anyway. The smallest windows get the first suggestion soonest.
                return (
                    min(window.STARTING_PREFIX_TOKENS, s.prefix_tokens),
                    window.WindowBudget.suffix_levels(s.suffix_tokens)[0],
                )
        pre, suf = budget.windows(s.prefix_tokens, s.suffix_tokens, target)
        busy = self.load.busy()
        if busy:
            self.metrics.count("context.shrunk_load")
        return load.windows_under_load(pre, suf, busy)

    def observe(self, target: Backend, req: UpstreamRequest, info: StreamInfo, record: bool) -> None:
        """Remember the prompt the engine saw last, and with ``record`` (a warm backend)
        give the window budget one latency sample: the prompt tokens the engine had to
        evaluate (after the beginning shared with the previous prompt, or llama-server's
        own ``cache_n``) and the TTFT."""
        budget = self._windows.setdefault(backend_key(target), window.WindowBudget())
        text = prompt_text(req.body)
        new = budget.new_text(text)
        total = tokens.count(text)
        reported = info.usage.get("timings")
        timings = reported if isinstance(reported, dict) else {}
        done, cached = timings.get("prompt_n"), timings.get("cache_n")
        if isinstance(done, int) and isinstance(cached, int) and done + cached > 0:
            new_tokens = round(total * done / (done + cached))
        else:
            new_tokens = tokens.count(new) if len(new) < len(text) else total
        # What each upstream request cost the engine in prefill (cl100k estimate), for
        # ``sidecar.stats`` and the typing benchmark; a cloud's cache is not visible.
        self.metrics.observe_size("prompt.new_tokens", new_tokens)
        self.metrics.observe_size("prompt.tokens", total)
        if not record or info.ttft_ms is None:
            return
        budget.observe(new_tokens, total, info.ttft_ms)

    def add_crossfile(self, ctx: CompletionContext, uri: str, cursor_line: int) -> CompletionContext:
        """``ctx`` with snippets of the other open documents (``crossfile/``) for a
        request in ``uri`` at 0-based ``cursor_line``, under ``crossfile_tokens``, and
        marked ``private`` when a content-exclusion rule covers ``uri``."""
        cf = self.crossfile
        if cf is None:
            return ctx
        rule = cf.excluded(uri)
        if rule:
            ctx = dataclasses.replace(ctx, private=rule)
        limit = crossfile.budget(self._settings().crossfile_tokens, is_local(self._target().provider))
        if self.load.busy():
            return ctx  # a busy shared engine gets no other files' snippets (load.py)
        snippets = cf.select(uri, cursor_line, ctx.prefix, ctx.suffix, limit)
        members = cf.members_at(uri, ctx.prefix)
        if members:
            ctx = dataclasses.replace(ctx, members=members)
        if not snippets:
            return ctx
        return dataclasses.replace(ctx, snippets=snippets, path=cf.path_of(uri), repo=cf.repo_name())
