"""Two-phase streaming of a constrained request (:func:`stream_healed`).

llama-cpp-python checks a grammar against the whole vocabulary at every token (13 -> 22
ms per token measured on 2 CPU cores), so there the constrained request only generates
the heal and is closed once it is out (:func:`split_request`); a second request without
the grammar goes on from the prompt plus that text (:func:`continuation`; the engine's
KV cache covers the prompt). Every other API gets its request as it is. See
docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Callable

from ...backends.base import StreamInfo, UpstreamRequest
from ..dialects import DIALECTS

# APIs whose grammar costs every generated token (llama-cpp-python applies it to the
# whole vocabulary at each step: measured 13 -> 22 ms per token on 2 CPU cores), so the
# constrained request only generates the heal and a plain one goes on from there.
GRAMMAR_PHASE_APIS = frozenset(name for name, d in DIALECTS.items() if d.grammar_phases)


def split_request(req: UpstreamRequest, api: str, heal: str, choices: tuple[str, ...] = ()) -> UpstreamRequest | None:
    """The constrained first phase of ``req`` (a request carrying a healing grammar), or
    None when ``req`` is sent as it is. The first phase may generate at most
    ``len(heal) + 1`` tokens (every token carries at least one character), and the stream
    is closed once the heal is out; with member ``choices`` (``plan.HealingPlan``), once
    a whole member and the character after it are out. :func:`continuation` goes on
    without the grammar."""
    body = req.body
    if api not in GRAMMAR_PHASE_APIS or not (heal or choices) or "grammar" not in body:
        return None
    if not isinstance(body.get("prompt"), str):
        return None
    need = _need(heal, choices)
    limit = int(body.get("max_tokens") or 0)
    first = dict(body, max_tokens=min(limit, need) if limit > 0 else need)
    return dataclasses.replace(req, body=first)


def _need(heal: str, choices: tuple[str, ...]) -> int:
    """Model tokens the constrained phase may need (a token carries 1+ characters)."""
    return (max(len(c) for c in choices) + 2) if choices else len(heal) + 1


def _out(produced: str, heal: str, choices: tuple[str, ...]) -> bool:
    """Whether the constrained part is out: the heal, or a whole member choice and the
    character after it (which shows the name ended)."""
    if not choices:
        return len(produced) >= len(heal)
    return (
        any(
            produced.startswith(c)
            and len(produced) > len(c)
            and not (produced[len(c)].isalnum() or produced[len(c)] in "_$")
            for c in choices
        )
        or len(produced) >= max(len(c) for c in choices) + 1
    )


def continuation(req: UpstreamRequest, produced: str, tokens_used: int) -> UpstreamRequest | None:
    """The second phase of a split ``req``: the same prompt followed by what the first
    phase produced (the heal and maybe more), no grammar, and the model tokens left of
    ``max_tokens`` (None when none are left). The engine reuses its KV cache for the
    prompt, so only the few new tokens are evaluated."""
    body = dict(req.body)
    body.pop("grammar", None)
    left = int(body.get("max_tokens") or 0) - max(0, tokens_used)
    if left <= 0:
        return None
    body["prompt"] = str(body["prompt"]) + produced
    body["max_tokens"] = left
    return dataclasses.replace(req, body=body)


async def stream_healed(
    stream: Callable[[UpstreamRequest, StreamInfo], AsyncGenerator[str, None]],
    req: UpstreamRequest,
    info: StreamInfo,
    api: str,
    heal: str,
    choices: tuple[str, ...] = (),
) -> AsyncGenerator[str, None]:
    """Yield the deltas of ``req`` from ``stream`` (a backend's ``stream``), in two phases
    where :func:`split_request` says so: the constrained request until the heal is out,
    then :func:`continuation`. ``info`` describes the whole: TTFT from the first phase,
    the end, finish reason, usage and truncation from the last; events are summed."""
    first = split_request(req, api, heal, choices)
    if first is None:
        async with contextlib.aclosing(stream(req, info)) as deltas:
            async for delta in deltas:
                yield delta
        return
    produced = ""
    cut = False
    async with contextlib.aclosing(stream(first, info)) as deltas:
        async for delta in deltas:
            produced += delta
            yield delta
            if _out(produced, heal, choices):
                cut = True  # the heal is out (or contradicted: the caller stops then)
                break
    if not cut or not produced.startswith(heal):
        return  # the first phase ended by itself: that was the whole answer
    second = continuation(req, produced, info.events)
    if second is None:
        return
    # The second phase's token log-probabilities go on the same list (the gate reads the
    # first line's, which spans both phases).
    more = StreamInfo(token_logprobs=info.token_logprobs)
    info.phases = 2
    try:
        async with contextlib.aclosing(stream(second, more)) as deltas:
            async for delta in deltas:
                yield delta
    finally:
        info.events += more.events
        info.malformed_events += more.malformed_events
        info.truncated = more.truncated
        info.finish_reason = more.finish_reason
        info.ended_at = more.ended_at or info.ended_at
        if more.usage:
            info.usage = more.usage
