"""A simulated shared serving engine: slots, a FIFO queue, a prefix cache, batched decoding.

With :meth:`SimulatedBackend.set_engine` (or ``python -m devtools.simulator
--engine-capacity N``, or ``POST /_sim/engine``) the ``/v1`` generation endpoints stop
using the plain :class:`~devtools.simulator.latency.LatencyModel` and are paced by one
:class:`SharedEngine` that every client shares, as a team's vLLM or SGLang server (continuous
batching, automatic prefix caching) or llama-server ``--parallel N`` is shared. The local
engine endpoints (``/infill``, ``/api/generate``) keep their own model.

The model
---------
Units: times in **seconds** (``*_s``) or **milliseconds** (``*_ms``); rates in **tokens
per second**; tokens are the simulator's token-like pieces
(:func:`devtools.simulator.tokens.count_tokens`: runs of word characters, whitespace, or
one symbol each, close to a code model's BPE count).

1. **Rate limits** (optional): the server's :class:`~devtools.simulator.ratelimits.RateLimiter`
   (RPM/TPM per sliding minute) answers a request over a limit with 429 and
   ``Retry-After`` before it reaches the engine; such a request costs the engine nothing.
2. **Overhead**: every request first spends ``overhead_ms`` (HTTP, tokenisation,
   scheduling; constant).
3. **Slots and queue**: at most ``capacity`` sequences run at once. A request that finds
   every slot taken waits in one FIFO queue; its **queue time** is from the end of the
   overhead to getting a slot. A client that disconnects while queued leaves the queue
   without running; one that disconnects while running frees its slot at once (vLLM
   aborts such a request).
4. **Prefix cache**: a prompt is split into blocks of ``block_tokens`` tokens; a block is
   *cached* when the same block with the same whole prefix before it was computed by an
   earlier request (a hash chain, like vLLM's automatic prefix caching). Only full blocks
   are reused; the cache keeps at most ``cache_tokens`` tokens of blocks, least recently
   used evicted first. The prompt the engine sees is, in order, the completion's
   ``prompt`` then its ``suffix`` (the prefix-suffix-middle order of Qwen2.5-Coder's FIM
   template), or SiliconFlow chat's ``prefix``/``suffix`` fields, or the chat messages'
   contents in order. So a change near the cursor invalidates everything after it: the
   suffix is recomputed whenever the prefix changes.
5. **Prefill**: the prompt's uncached tokens (the *prefill tokens*) cost
   ``prefill_tokens / prefill_tps`` seconds on **one prefill pipeline shared by all
   sequences**, served in FIFO order: a prefill starts when the previous one has ended
   (or now, when the pipeline is idle). A sequence cut off during its prefill still
   occupies the pipeline for its scheduled time (the engine has already batched that
   compute), but only the part computed so far enters the cache.
6. **Decoding**: after the prefill, a sequence emits one token per step; a step takes
   ``(1 + batch_slowdown * (b - 1)) / decode_tps`` seconds, ``b`` being the sequences
   holding a slot when the step starts (prefilling or decoding). One sequence alone
   decodes at ``decode_tps``; ``b`` of them at ``decode_tps / (1 + batch_slowdown*(b-1))``
   each, so the engine's total throughput ``b * decode_tps / (1 + batch_slowdown*(b-1))``
   grows with the batch and levels off towards ``decode_tps / batch_slowdown``. An answer
   that ends naturally (``finish_reason == "stop"``) costs one more step, for its
   end-of-sequence or stop token; that step counts as a generated token.

Time to first token is therefore ``overhead + queue time + prefill wait + prefill + one
step``.

Counters (:meth:`SharedEngine.stats`, ``GET /_sim/engine``), since the engine was set or
its counters reset (``POST /_sim/engine/reset``):

- ``utilisation``: busy sequence-seconds (time sequences held a slot) / ``capacity`` /
  wall seconds, in [0, 1].
- ``queue_ms``: p50/p90/max of the queue times of the sequences that got a slot
  (nearest rank), plus ``abandoned_in_queue`` (clients that left while queued).
- ``prompt_tokens``, ``cached_tokens`` (reused from the cache), ``prefill_tokens``
  (computed), ``prefill_busy_s`` (time the prefill pipeline was scheduled),
  ``generated_tokens`` (decode steps done).
- ``rate_limited``: 429 answers sent (filled in by the server from its rate limiter).
- ``timer_lateness_ms``: how late the engine's own timers fired (p50/p90/max): the
  simulator's event loop falling behind (a saturated CPU) shows here first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any

from aiohttp import web

from .faults import Fault
from .protocol import Shape
from .recorder import RecordedRequest
from .responses import Framing, close_stream, open_stream, send_whole, stream_fault, write_token
from .tokens import OutputPlan, split_tokens

logger = logging.getLogger(__name__)

_LATENESS_SAMPLES = 20_000  # the most recent timer wake-ups kept for the lateness figures


@dataclass(frozen=True)
class EngineConfig:
    """Parameters of a :class:`SharedEngine` (see the module doc for the model).

    Attributes:
        capacity: sequences that run at once (>= 1), e.g. vLLM's ``--max-num-seqs`` or
            llama-server's ``--parallel``.
        prefill_tps: prefill speed of the shared pipeline, prompt tokens per second (> 0).
        decode_tps: decoding speed of one sequence alone, tokens per second (> 0).
        batch_slowdown: extra step time per additional sequence in the batch, as a
            fraction of the single-sequence step (>= 0, dimensionless).
        overhead_ms: constant per-request overhead, milliseconds (>= 0).
        block_tokens: tokens per prefix-cache block (>= 1).
        cache_tokens: prefix-cache size in tokens (>= 0; 0 disables the cache).

    Raises:
        ValueError: on a value out of range.
    """

    capacity: int = 8
    prefill_tps: float = 2000.0
    decode_tps: float = 50.0
    batch_slowdown: float = 0.1
    overhead_ms: float = 30.0
    block_tokens: int = 16
    cache_tokens: int = 262_144

    def __post_init__(self) -> None:
        for name in ("capacity", "block_tokens", "cache_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an integer, got {v!r}")
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")
        if self.block_tokens < 1:
            raise ValueError(f"block_tokens must be >= 1, got {self.block_tokens}")
        if self.cache_tokens < 0:
            raise ValueError(f"cache_tokens must be >= 0, got {self.cache_tokens}")
        for name in ("prefill_tps", "decode_tps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be a number > 0 (tokens/s), got {v!r}")
        for name in ("batch_slowdown", "overhead_ms"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {v!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EngineConfig:
        """Build from constructor keys (missing ones take the defaults).

        Raises:
            ValueError: on an unknown key or a bad value.
        """
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown engine keys: {sorted(unknown)}")
        return cls(**dict(data))

    def step_s(self, batch: int) -> float:
        """Seconds per decode step with ``batch`` sequences holding a slot."""
        return (1.0 + self.batch_slowdown * max(0, batch - 1)) / self.decode_tps


def engine_prompt(body: Mapping[str, Any] | None) -> str:
    """The prompt text the engine sees for a ``/v1`` request body (see the module doc, 4)."""
    if not isinstance(body, Mapping):
        return ""
    parts: list[str] = []
    if isinstance(body.get("prompt"), str):
        parts.append(body["prompt"])
    if isinstance(body.get("prefix"), str):  # SiliconFlow chat FIM fields
        parts.append(body["prefix"])
    for m in body.get("messages") or []:
        if isinstance(m, Mapping) and isinstance(m.get("content"), str):
            parts.append(m["content"])
    if isinstance(body.get("suffix"), str):
        parts.append(body["suffix"])
    return "\x00".join(parts)  # a separator piece, as the FIM tokens between the parts


def _nearest_rank(samples: list[float], q: float) -> float | None:
    if not samples:
        return None
    s = sorted(samples)
    k = max(0, min(len(s) - 1, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[k]


def _ms(x: float | None) -> float | None:
    return None if x is None else round(x * 1000.0, 2)


class Sequence:
    """One request running in a slot of the engine. Created by :meth:`SharedEngine.sequence`.

    Attributes (tokens): ``prompt_tokens``, ``cached_tokens``, ``prefill_tokens``,
    ``generated``; ``queue_s`` the queue time in seconds.
    """

    def __init__(self, engine: SharedEngine, pieces: list[str]) -> None:
        self._engine = engine
        self._pieces = pieces
        self.prompt_tokens = len(pieces)
        self.cached_tokens = 0
        self.prefill_tokens = 0
        self.generated = 0
        self.queue_s = 0.0
        self._next_step_at = 0.0

    async def prefill(self) -> None:
        """Wait for the prompt's prefill (see the module doc, 5)."""
        e = self._engine
        hashes = e._block_hashes(self._pieces)
        cached_blocks = e._cached_blocks(hashes)
        self.cached_tokens = cached_blocks * e.config.block_tokens
        self.prefill_tokens = self.prompt_tokens - self.cached_tokens
        now = e._clock()
        start = max(now, e._prefill_free_at)
        cost = self.prefill_tokens / e.config.prefill_tps
        done = start + cost
        e._prefill_free_at = done
        e._counters["prompt_tokens"] += self.prompt_tokens
        e._counters["cached_tokens"] += self.cached_tokens
        e._counters["prefill_tokens"] += self.prefill_tokens
        e._prefill_busy += cost
        try:
            await e._sleep_until(done)
        except asyncio.CancelledError:
            # Only what was computed before the cut enters the cache.
            frac = 0.0 if cost <= 0 else max(0.0, min(1.0, (e._clock() - start) / cost))
            computed = self.cached_tokens + int(self.prefill_tokens * frac)
            e._remember(hashes[: computed // e.config.block_tokens])
            raise
        e._remember(hashes)
        self._next_step_at = e._clock()

    async def step(self) -> None:
        """Wait for one decode step (see the module doc, 6); counts one generated token."""
        e = self._engine
        at = self._next_step_at + e.config.step_s(e._active)
        await e._sleep_until(at)
        self._next_step_at = at
        self.generated += 1
        e._counters["generated_tokens"] += 1


class SharedEngine:
    """The engine every ``/v1`` generation request shares (see the module doc).

    Runs on the event loop of its callers; not thread-safe. ``clock`` returns seconds
    (monotonic).
    """

    def __init__(self, config: EngineConfig | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config or EngineConfig()
        self._clock = clock
        self._active = 0  # sequences holding a slot
        self._queue: deque[asyncio.Future[None]] = deque()
        self._prefill_free_at = 0.0
        self._cache: OrderedDict[int, None] = OrderedDict()
        self._slot_since: dict[int, float] = {}  # id(seq) -> when it got its slot
        self.reset_counters()

    # -- counters ---------------------------------------------------------------------

    def reset_counters(self) -> None:
        """Start the counters afresh now (the cache, queue and running sequences stay)."""
        now = self._clock()
        self._reset_at = now
        self._busy_closed = 0.0
        self._prefill_busy = 0.0
        self._queue_times: list[float] = []
        self._lateness: deque[float] = deque(maxlen=_LATENESS_SAMPLES)
        self._max_queue = len(self._queue)
        self._max_active = self._active
        self._counters = {
            "requests": 0,  # sequences that got a slot
            "completed": 0,
            "cancelled_running": 0,
            "abandoned_in_queue": 0,
            "prompt_tokens": 0,
            "cached_tokens": 0,
            "prefill_tokens": 0,
            "generated_tokens": 0,
        }

    @property
    def active(self) -> int:
        """Sequences holding a slot now."""
        return self._active

    @property
    def queued(self) -> int:
        """Requests waiting for a slot now."""
        return sum(1 for f in self._queue if not f.done())

    def stats(self) -> dict[str, Any]:
        """The counters as a JSON-ready dict (see the module doc for each key)."""
        now = self._clock()
        wall = max(1e-9, now - self._reset_at)
        busy = self._busy_closed + sum(now - max(t, self._reset_at) for t in self._slot_since.values())
        q = self._queue_times
        lat = list(self._lateness)
        return {
            "config": self.config.to_dict(),
            "wall_s": round(wall, 3),
            "busy_sequence_s": round(busy, 3),
            "utilisation": round(busy / self.config.capacity / wall, 4),
            "prefill_busy_s": round(self._prefill_busy, 3),
            "prefill_utilisation": round(min(self._prefill_busy, wall) / wall, 4),
            **self._counters,
            "queue_ms": {
                "p50": _ms(_nearest_rank(q, 50)),
                "p90": _ms(_nearest_rank(q, 90)),
                "max": _ms(max(q) if q else None),
                "samples": len(q),
            },
            "max_queue_length": self._max_queue,
            "max_active": self._max_active,
            "active": self._active,
            "queued": self.queued,
            "cache_blocks": len(self._cache),
            "timer_lateness_ms": {
                "p50": _ms(_nearest_rank(lat, 50)),
                "p90": _ms(_nearest_rank(lat, 90)),
                "max": _ms(max(lat) if lat else None),
                "samples": len(lat),
            },
        }

    # -- prefix cache -----------------------------------------------------------------

    def _block_hashes(self, pieces: list[str]) -> list[int]:
        """Chain hashes of the prompt's full blocks."""
        n = self.config.block_tokens
        out: list[int] = []
        h = 0
        for i in range(0, len(pieces) - n + 1, n):
            h = hash((h, tuple(pieces[i : i + n])))
            out.append(h)
        return out

    def _cached_blocks(self, hashes: list[int]) -> int:
        count = 0
        for h in hashes:
            if h not in self._cache:
                break
            self._cache.move_to_end(h)
            count += 1
        return count

    def _remember(self, hashes: list[int]) -> None:
        limit = self.config.cache_tokens // self.config.block_tokens
        if limit == 0:
            return
        for h in hashes:
            self._cache[h] = None
            self._cache.move_to_end(h)
        while len(self._cache) > limit:
            self._cache.popitem(last=False)

    # -- time -------------------------------------------------------------------------

    async def _sleep_until(self, at: float) -> None:
        delay = at - self._clock()
        if delay > 0:
            await asyncio.sleep(delay)
            self._lateness.append(max(0.0, self._clock() - at))

    # -- slots ------------------------------------------------------------------------

    async def _acquire(self) -> None:
        if self._active < self.config.capacity and not self.queued:
            self._active += 1
            self._max_active = max(self._max_active, self._active)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append(fut)
        self._max_queue = max(self._max_queue, self.queued)
        try:
            await fut  # _release hands its slot over (``_active`` unchanged)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # the slot came just as the client left: pass it on
            else:
                try:
                    self._queue.remove(fut)
                except ValueError:
                    pass
            self._counters["abandoned_in_queue"] += 1
            raise

    def _release(self) -> None:
        while self._queue:
            fut = self._queue.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._active -= 1

    @asynccontextmanager
    async def sequence(self, prompt_text: str) -> AsyncIterator[Sequence]:
        """Overhead, then queue for a slot; the slot is held inside the ``async with``.

        A cancellation (client disconnect) while queued leaves the queue; inside, it frees
        the slot and counts as ``cancelled_running``.
        """
        seq = Sequence(self, split_tokens(prompt_text))
        if self.config.overhead_ms > 0:
            await self._sleep_until(self._clock() + self.config.overhead_ms / 1000.0)
        queued_at = self._clock()
        await self._acquire()
        got = self._clock()
        seq.queue_s = got - queued_at
        self._queue_times.append(seq.queue_s)
        self._counters["requests"] += 1
        key = id(seq)
        self._slot_since[key] = got
        ok = False
        try:
            yield seq
            ok = True
        finally:
            since = self._slot_since.pop(key)
            self._busy_closed += self._clock() - max(since, self._reset_at)
            self._counters["completed" if ok else "cancelled_running"] += 1
            self._release()


# -- serving through the engine -----------------------------------------------------------


def _steps(plan: OutputPlan) -> int:
    return len(plan.pieces) + (1 if plan.finish_reason == "stop" else 0)


async def engine_stream(
    engine: SharedEngine,
    request: web.Request,
    record: RecordedRequest,
    framing: Framing,
    plan: OutputPlan,
    fault: Fault | None,
    prompt_text: str,
    on_token: Callable[[], None],
) -> web.StreamResponse:
    """Stream ``plan`` in ``framing``'s format, paced by ``engine`` (the order of frames is
    :func:`devtools.simulator.responses.stream_frames`'s; faults act the same way)."""
    resp = await open_stream(request, record, framing)
    async with engine.sequence(prompt_text) as seq:
        await seq.prefill()
        pending = fault
        for i, piece in enumerate(plan.pieces):
            await seq.step()
            if i == 0:
                for frame in framing.before_tokens():
                    await resp.write(frame)
            if pending is not None and pending.after_tokens == i:
                fault_now, pending = pending, None
                if await stream_fault(request, resp, record, fault_now, framing):
                    return resp
            await write_token(resp, record, framing, piece, i)
            on_token()
        if plan.finish_reason == "stop":
            await seq.step()  # the end-of-sequence token
        if not plan.pieces:
            for frame in framing.before_tokens():
                await resp.write(frame)
        if pending is not None and await stream_fault(request, resp, record, pending, framing):
            return resp
    return await close_stream(resp, record, framing, plan)


async def engine_whole(
    engine: SharedEngine,
    request: web.Request,
    record: RecordedRequest,
    shape: Shape,
    plan: OutputPlan,
    prompt_tokens: int,
    fault: Fault | None,
    prompt_text: str,
) -> web.StreamResponse:
    """Answer a non-streaming request once the engine has prefilled and decoded ``plan``."""
    async with engine.sequence(prompt_text) as seq:
        await seq.prefill()
        for _ in range(_steps(plan)):
            await seq.step()
    return await send_whole(request, record, shape, plan, prompt_tokens, fault)


__all__ = ["EngineConfig", "Sequence", "SharedEngine", "engine_prompt", "engine_stream", "engine_whole"]
