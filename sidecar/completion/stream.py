"""One upstream stream: readiness, the rate-limit gate, the prompt strategy (with FIM
fallback), token healing and the stream's deadline.

For a request's context the runner waits until the backend the next stream goes to is
ready, asks its cooldown (``backends/ratelimit.py``) whether a request may go out,
builds the request (``prompts/``, ``healing/``), streams the deltas through the
un-healer into the postprocessing filter until the filter says stop, the stream ends or
the deadline passes, and records the outcome: errors (``reports.py``: one message per
cause), the auto-mode breaker (``Backend.record``), and what it measured
(``stream_record.py``).

Until its first text a stream gets the deadline ``warm.py`` gives it (longer on a
backend that may be loading its model or evaluating a long prompt); then
``request_timeout_ms``. A model that refuses a strategy (native FIM ``suffix``) is
retried once with the next, and the refusal remembered per model. See
docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..backends.base import StreamInfo, UpstreamRequest
from ..backends.errors import CONNECTION, ENGINE, FIM_UNSUPPORTED, OVERLOADED, RATE_LIMITED, BackendError
from ..observability.redact import redact_code
from ..providers import is_local
from . import healing
from .context import CompletionContext
from .dialects import dialect_for
from .postprocess import StreamFilter
from .postprocess.receiver_stutter import ReceiverStutter, receiver_before_cursor
from .prompts import build_request, choose_strategy
from .prompts.eol import line_break_lift
from .stream_record import StreamRecord, record_stream
from .warm import WarmBackends, warm_key_of

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..config import Settings
    from ..metrics import Metrics
    from .context_budget import ContextBudget
    from .reports import Reports

log = logging.getLogger(__name__)


@dataclass
class StreamDeps:
    """What the stream runner needs, each looked up when a stream runs (the settings and
    the backend change at run time). The completion service provides them
    (``CompletionService.__init__``); the unit tests give fakes."""

    settings: Callable[[], Settings]  # the live settings
    target: Callable[[], Backend]  # the backend the next stream goes to (a router picks a side)
    record: Callable[[Backend, BackendError | None], None]  # the auto-mode breaker: ``Backend.record``
    metrics: Metrics
    reports: Reports  # one message per cause, slowness
    context_budget: ContextBudget  # the window budget's and load's samples
    spare_connection: Callable[[], None]  # open a spare connection after a socket was closed


class StreamRunner:
    """Runs upstream streams with its collaborators (:class:`StreamDeps`); remembers
    which backends are warm and which strategies each model refused."""

    def __init__(self, deps: StreamDeps) -> None:
        self.deps = deps
        self.warm = WarmBackends()  # backends that have sent a stream event (warm.py)
        self._rejected: dict[str, set[str]] = {}  # model -> strategies it refused

    def reset(self) -> None:
        """New settings: refused strategies may work with the new backend."""
        self._rejected.clear()

    def _redacted(self, ctx: CompletionContext) -> CompletionContext:
        """``ctx`` with every other file's snippet passed through the redaction step
        (``observability/redact.py``: keys, tokens, passwords, private-key blocks), for a
        cloud backend; counts ``privacy.redacted_snippets`` when one changed."""
        if not ctx.snippets:
            return ctx
        clean = tuple(dataclasses.replace(s, text=_redact_snippet(s.text)) for s in ctx.snippets)
        changed = sum(a.text != b.text for a, b in zip(clean, ctx.snippets, strict=True))
        if not changed:
            return ctx
        self.deps.metrics.count("privacy.redacted_snippets", changed)
        return dataclasses.replace(ctx, snippets=clean)

    def cold(self, target: Backend) -> bool:
        """No stream event from ``target`` since it started or came back."""
        return warm_key_of(target) not in self.warm

    def _build(
        self, ctx: CompletionContext, strategy: str, target: Backend, model: str
    ) -> tuple[healing.HealingPlan, str, UpstreamRequest]:
        """``(healing plan, the lifted line break (prompts/eol.py), UpstreamRequest)`` for ``ctx`` sent with
        ``strategy`` to ``target``."""
        s = self.deps.settings()
        plan = healing.plan_for(ctx, api=target.api, strategy=strategy) if s.token_healing else healing.NO_HEALING
        # At the end of a finished line the prompt ends with the line break, and the
        # filter gets it back before the first delta (prompts/eol.py).
        line_break = line_break_lift(ctx, strategy) if not plan.heal else ""
        req = build_request(
            dataclasses.replace(ctx, prefix=ctx.prefix + line_break) if line_break else ctx,
            strategy,
            api=target.api,
            model=model,
            max_tokens=s.max_tokens,
            temperature=s.temperature,
            heal=plan,
        )
        if (
            (s.gate_enabled or s.confidence_cut_logprob)
            and dialect_for(target.api).logprobs
            and req.endpoint in ("completions", "chat/completions")
        ):
            # Token log-probabilities for the confidence gate (gate.py) and cut (postprocess/confidence.py).
            req.body["logprobs"] = 1 if req.endpoint == "completions" else True
        return plan, line_break, req

    async def run(
        self,
        ctx: CompletionContext,
        filt: StreamFilter,
        on_delta: Callable[[], None] | None = None,
        *,
        waking: bool = False,
    ) -> StreamRecord:
        """Stream one upstream completion for ``ctx`` into ``filt`` until the filter says
        stop, the stream ends, or ``request_timeout_ms`` passes; call ``on_delta()`` after
        each piece of text. A model that refuses native FIM is retried once per strategy.

        Upstream errors are reported (one message per cause) and returned in
        ``StreamRecord.error``; never raises BackendError. Raises
        ``asyncio.CancelledError`` when cancelled, after closing the upstream stream.
        """
        t0 = time.perf_counter()
        svc = self.deps
        s = svc.settings()
        target = svc.target()
        model = target.model
        rejected = self._rejected.setdefault(model, set())
        out = StreamRecord(info=StreamInfo())
        if not is_local(target.provider):
            if ctx.private:
                # Content exclusion (crossfile/exclusion.py): nothing of this file goes
                # to a cloud; the answer is empty.
                svc.metrics.count("privacy.cloud_refused")
                _note_private(ctx.private)
                return out
            ctx = self._redacted(ctx)
        if target.engine is not None and not target.ready:
            # A managed engine still starting runs its warm-up on this request's prompt,
            # which it then has in its KV cache (ManagedEngine.wait_ready).
            strategy = choose_strategy(target.api, model, s.fim, frozenset(rejected))
            prompt = self._build(ctx, strategy, target, model)[2].body.get("prompt")
            if isinstance(prompt, str):
                target.expect_prompt(prompt)
        try:
            await target.ensure_ready()
        except BackendError as err:
            svc.record(target, err)
            svc.reports.error(err)
            out.error = err
            return out
        out.wait_ms = (time.perf_counter() - t0) * 1000
        cooldown = target.cooldown
        if cooldown is not None and not cooldown.admit():
            # The backend said 429/503 and its window is not over (backends/ratelimit.py):
            # nothing goes upstream; no message (the episode's first failure had one).
            svc.metrics.count("upstream.rate_limited_skipped")
            out.error = BackendError(
                RATE_LIMITED, f"{target.name} is cooling down for {cooldown.remaining_s():.1f} s more", actionable=False
            )
            return out
        warm_key = warm_key_of(target)
        was_warm = warm_key in self.warm
        deadline_ms = self.warm.first_text_deadline_ms(target, s, waking=waking)
        for _attempt in range(3):
            strategy = choose_strategy(target.api, model, s.fim, frozenset(rejected))
            plan, line_break, req = self._build(ctx, strategy, target, model)
            unheal = healing.Unhealer(plan.heal)  # the model re-writes the heal; the filter never sees it
            # ``Name.`` before the cursor and the model starts with ``Name.`` again.
            stutter = ReceiverStutter(receiver_before_cursor(ctx.line_prefix, ctx.prefix, ctx.suffix))
            req.read_timeout_s = deadline_ms / 1000
            out.info = info = StreamInfo()
            info.token_logprobs = filt.token_logprobs  # the gate reads them from the filter (gate.py)
            out.strategy = req.strategy
            svc.metrics.count("upstream.requests")
            try:
                async with asyncio.timeout(deadline_ms / 1000) as limit:

                    def answered(limit: asyncio.Timeout = limit) -> None:
                        # The first bytes came: the backend is up (and loaded), so from
                        # now on the ordinary deadline holds.
                        nonlocal deadline_ms
                        self.warm.add(warm_key)
                        if deadline_ms != s.request_timeout_ms:
                            deadline_ms = s.request_timeout_ms
                            limit.reschedule(asyncio.get_running_loop().time() + deadline_ms / 1000)

                    # Headers show the backend is up, so a cloud that stalls after them is
                    # bounded as usual; where they come before the prompt is read, only the
                    # first text does (a slow first prompt was cut 300 ms after them).
                    info.on_headers = None if target.headers_before_prompt else answered
                    # With a healing grammar on llama-cpp-python: constrained until the heal
                    # is out, then a plain continuation (healing.stream_healed).
                    async with contextlib.aclosing(
                        healing.stream_healed(target.stream, req, info, target.api, plan.heal, plan.choices)
                    ) as deltas:
                        async for delta in deltas:
                            answered()
                            delta = unheal.feed(delta)
                            if unheal.mismatch:  # a candidate that does not continue the cursor's word
                                svc.metrics.count("heal.mismatch")
                                break
                            delta = stutter.feed(delta)
                            if line_break and delta:
                                delta, line_break = line_break + delta, ""
                            stop = filt.feed(delta)
                            if on_delta is not None:
                                on_delta()
                            if stop:
                                svc.metrics.count("upstream.closed_early")
                                break
                    rest = stutter.flush()  # a start of the receiver that never completed
                    if rest and not filt.done and not unheal.mismatch:
                        filt.feed(line_break + rest)
                        line_break = ""
                        if on_delta is not None:
                            on_delta()
                    if stutter.stripped:
                        svc.metrics.count("postprocess.receiver_stutter")
                if filt.done or unheal.mismatch:  # closed before its end: the socket went with it
                    svc.spare_connection()
            except TimeoutError:
                out.deadline_hit = True
                svc.metrics.count("upstream.deadline")
                log.info("deadline of %d ms reached with %d chars", deadline_ms, len(filt.raw))
            except BackendError as err:
                if err.kind == FIM_UNSUPPORTED and strategy not in rejected:
                    log.info("model %s refused strategy %s; falling back", model, strategy)
                    rejected.add(strategy)
                    continue
                if err.kind in (CONNECTION, ENGINE):
                    self.warm.discard(warm_key)  # gone: when it comes back it may load again
                if err.kind in (RATE_LIMITED, OVERLOADED) and cooldown is not None:
                    svc.metrics.count("upstream.rate_limited")
                    if not cooldown.failure(err.retry_after_s):
                        # One message per episode: later 429/503s of it go to the log.
                        err = dataclasses.replace(err, actionable=False)
                svc.record(target, err)
                svc.reports.error(err)
                out.error = err
                return out
            except asyncio.CancelledError:
                svc.metrics.count("upstream.cancelled")
                # The engine saw this prompt (its KV cache holds what it evaluated): count
                # its prefill and remember it as the last prompt; no latency sample.
                svc.context_budget.observe(target, req, info, record=False)
                # Closing a stream mid-way closes its socket (HTTP/1.1); open a spare one
                # now so the next request does not pay for a TCP and TLS handshake.
                svc.spare_connection()
                raise
            break
        if info.events:
            self.warm.add(warm_key)
        if cooldown is not None and info.headers_at:
            cooldown.success()
        svc.record(target, None)
        record_stream(
            out,
            filt,
            target,
            req,
            was_warm=was_warm,
            metrics=svc.metrics,
            reports=svc.reports,
            context_budget=svc.context_budget,
        )
        return out


@functools.lru_cache(maxsize=256)
def _redact_snippet(text: str) -> str:
    """:func:`redact_code` of a snippet's text, remembered: the same snippets come with every
    keystroke while the cursor stays in one block (``crossfile/select.py``)."""
    return redact_code(text)


_noted_private: set[str] = set()


def _note_private(rule: str) -> None:
    """Log once per rule that a file it covers gets no cloud completion."""
    if rule not in _noted_private and len(_noted_private) < 1000:
        _noted_private.add(rule)
        log.info("content exclusion: no completion from the cloud backend in a file under %s", rule)
