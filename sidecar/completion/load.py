"""Is the backend busy? A shared engine's load, read off the TTFTs it gives us.

On a shared engine (vLLM, SGLang, llama-server ``--parallel``, a team's Ollama, a cloud
account with other users) the time to first token grows when other sequences queue in
front of ours. Speculative prefetch is load we add for a suggestion that may never be
shown, so it is the first thing to give up while the engine is busy (docs/backends.md "Rate
limits and shared backends"; issue 15).

Prefetch is the first to go; the prompt is the second (:func:`windows_under_load`): while
the backend is busy, every new prompt it must evaluate costs prefill time that all its
users share, so the windows shrink to half (never under ``LOAD_FLOOR_TOKENS`` prefix
tokens, nor above what they were) and other files' snippets are left out. They come
back when the backend is idle again. The ``busy`` flag has hysteresis, so this changes
the prompt's beginning (and the engine's prefix cache hits) only at the switches.

The rule (:class:`BackendLoad`): keep the last ``HISTORY`` TTFTs (ms) of real streams of
one backend. The *baseline* is their ``BASELINE_QUANTILE`` quantile (what the engine
gives when it is idle; at least ``MIN_SAMPLES`` samples are needed), the *recent* level
the median of the last ``RECENT`` samples. The backend is busy while

    recent > BUSY_FACTOR x baseline  and  recent - baseline > BUSY_MIN_EXTRA_MS,

and stays busy until ``recent`` falls back under ``IDLE_FACTOR x baseline`` (hysteresis,
so a single fast answer does not switch prefetch back on under load). The absolute
margin keeps a fast backend's jitter (30 ms against 70 ms) from counting as load.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..backends.base import Backend

HISTORY = 100
RECENT = 8
MIN_SAMPLES = 12
BASELINE_QUANTILE = 0.2
BUSY_FACTOR = 2.0
IDLE_FACTOR = 1.5
BUSY_MIN_EXTRA_MS = 150.0
LOAD_WINDOW_FACTOR = 0.5
LOAD_FLOOR_TOKENS = 256


def windows_under_load(prefix_tokens: int, suffix_tokens: int, busy: bool) -> tuple[int, int]:
    """``(prefix_tokens, suffix_tokens)`` (cl100k tokens) to cut now. Idle: unchanged.
    Busy: the prefix window times ``LOAD_WINDOW_FACTOR`` but at least
    ``LOAD_FLOOR_TOKENS`` (or the given window, if smaller), and the suffix window scaled
    by the same ratio (rounded up). (Cross-file snippets are dropped while busy:
    ``ContextBudget.add_crossfile``.)"""
    if not busy or prefix_tokens <= 0:
        return prefix_tokens, suffix_tokens
    pre = max(min(LOAD_FLOOR_TOKENS, prefix_tokens), int(prefix_tokens * LOAD_WINDOW_FACTOR))
    suf = min(suffix_tokens, -(-suffix_tokens * pre // prefix_tokens))
    return pre, suf


class BackendLoad:
    """TTFT history of one backend and whether it looks busy (see the module doc)."""

    def __init__(self) -> None:
        self._ttfts: deque[float] = deque(maxlen=HISTORY)
        self._busy = False

    def observe(self, ttft_ms: float) -> None:
        """Record one stream's time to first token, in ms (>= 0)."""
        if ttft_ms >= 0:
            self._ttfts.append(float(ttft_ms))
            self._busy = self._judge()

    def baseline_ms(self) -> float | None:
        """The idle level: the ``BASELINE_QUANTILE`` quantile of the history, in ms (None
        with fewer than ``MIN_SAMPLES`` samples)."""
        if len(self._ttfts) < MIN_SAMPLES:
            return None
        xs = sorted(self._ttfts)
        return xs[int(BASELINE_QUANTILE * (len(xs) - 1))]

    def recent_ms(self) -> float | None:
        """Median of the last ``RECENT`` TTFTs, in ms (None before the first)."""
        if not self._ttfts:
            return None
        return statistics.median(list(self._ttfts)[-RECENT:])

    @property
    def busy(self) -> bool:
        """True while the backend answers markedly slower than its idle level."""
        return self._busy

    def _judge(self) -> bool:
        base, recent = self.baseline_ms(), self.recent_ms()
        if base is None or recent is None:
            return False
        if self._busy:
            return recent > IDLE_FACTOR * base
        return recent > BUSY_FACTOR * base and recent - base > BUSY_MIN_EXTRA_MS


def backend_key(target: Backend) -> str:
    """What the per-backend figures (load, window budgets) are kept under: provider,
    backend name and model."""
    return f"{target.provider}:{target.name}:{target.model}"


class LoadTracker:
    """A :class:`BackendLoad` per backend and model, and whether the backend the next
    stream goes to (``target()``) is busy."""

    def __init__(self, target: Callable[[], Backend]) -> None:
        self._target = target
        self._load: dict[str, BackendLoad] = {}

    def observe(self, target: Backend, ttft_ms: float) -> None:
        """One warm stream's time to first token (ms) on ``target``."""
        self._load.setdefault(backend_key(target), BackendLoad()).observe(ttft_ms)

    def busy(self) -> bool:
        """The backend the next stream goes to answers markedly slower than its idle
        level. Never the managed engine: that child process serves this sidecar alone, so
        a slow answer there is one of our own prompts, which the window budget already
        prices. Read as load, it halved the windows, which broke the prompt beginning the
        engine had cached and made the next answers slower still (typing benchmark, 0.5B
        on 2 cores: windows halved 39-70 times in a 400-key run, prefill p90 274-403
        tokens against 52 without)."""
        target = self._target()
        if target.engine is not None:
            return False
        tracker = self._load.get(backend_key(target))
        return bool(tracker is not None and tracker.busy)
