"""Adaptive debounce: how long to wait after a keystroke before asking the backend.

The wait adapts to three things:

1. **Typing cadence.** The median of the document's recent inter-key intervals (the last
   8, ignoring gaps over 2 s, which are pauses rather than rhythm). A person who types a
   key every 120 ms has paused once no key came for about 1.5 intervals, so waiting
   ``1.5 x median`` catches real pauses without firing between keys.
2. **Cursor context.** On a fresh line (blank or indentation only, just after Enter) and
   right after ``( . : = ,`` or an opening bracket, people pause and want a suggestion
   now (factor 0.6); right after a word character the user is most likely still typing
   that word (1.4); anywhere else, such as after a closing bracket, a normal wait (1.0).
3. **Backend time to first token.** A request that is superseded before its first token
   still costs its prompt tokens and a connection. The slower the backend, the more the
   debounce can grow without changing the felt latency much: the wait is at least a
   quarter of the recent median TTFT (times the context factor).

The result is clamped to ``[floor_ms, ceiling_ms]`` (settings ``debounce_min_ms``,
default 50, and ``debounce_max_ms``, default 400 ms for a cloud backend and 100 ms for a
local engine: :func:`ceiling_ms`). An Invoked trigger (the user asked) waits 0.

**Why a local engine gets a short ceiling.** On a cloud backend the wait saves requests
and money. On a local engine the cost of a suggestion is prompt evaluation on the
user's own CPU, the largest part of its latency (TTFT ~450 ms for the 0.5B code model
on 2 cores, with the KV cache reused), and a stream started early is not wasted when
the user types on: until it has text it agrees with anything typed, so the next keys
join it (``session.py``) and its evaluation overlaps the typing. Measured with the typing
benchmark (``devtools.bench --backend local``, Qwen2.5-Coder-0.5B, 2 cores, ~390
keys): a suggestion before the next key at 24-26% of the keys with a 400 ms ceiling,
38-39% with 100 ms, 37% with 50 ms; right 13% → 23-24% → 19%; upstream requests
46-47, 46-47 and 58. Before the sidecar has seen any keystrokes, the cadence is assumed to be
150 ms, a brisk typist.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import deque

DEFAULT_INTERVAL_MS = 150.0
PAUSE_GAP_MS = 2000.0
WINDOW = 8

_EAGER_AFTER = ("(", ".", ":", "=", ",", "[", "{", "->", "=>")


def context_factor(line_prefix: str, line_suffix: str) -> float:
    """Multiplier for the cursor context (see module doc)."""
    stripped = line_prefix.rstrip()
    if not stripped or stripped.endswith(_EAGER_AFTER):
        return 0.6  # a fresh line (after Enter) or right after ( . : = ,
    last = line_prefix[-1]
    if last.isalnum() or last == "_":
        return 1.4  # inside or at the end of a word that is still being typed
    return 1.0


class Cadence:
    """Recent inter-key intervals of one document, in milliseconds."""

    def __init__(self) -> None:
        self._last_ms: float | None = None
        self._gaps: deque[float] = deque(maxlen=WINDOW)

    def keystroke(self, now_ms: float) -> None:
        """Record a document change at monotonic time ``now_ms``."""
        if self._last_ms is not None:
            gap = now_ms - self._last_ms
            if 0 <= gap < PAUSE_GAP_MS:
                self._gaps.append(gap)
        self._last_ms = now_ms

    def typed_within(self, now_ms: float, window_ms: float) -> bool:
        """A change was recorded less than ``window_ms`` before monotonic time ``now_ms``."""
        return self._last_ms is not None and now_ms - self._last_ms < window_ms

    def interval_ms(self) -> float:
        """Median recent interval, or ``DEFAULT_INTERVAL_MS`` with fewer than 2 samples."""
        if len(self._gaps) < 2:
            return DEFAULT_INTERVAL_MS
        return statistics.median(self._gaps)


CLOUD_CEILING_MS = 400
LOCAL_CEILING_MS = 100


def ceiling_ms(setting: int | None, local: bool) -> int:
    """The debounce ceiling in ms: ``debounce_max_ms`` when set, else
    ``LOCAL_CEILING_MS`` for a local engine and ``CLOUD_CEILING_MS`` for a cloud one
    (module doc)."""
    if setting is not None:
        return setting
    return LOCAL_CEILING_MS if local else CLOUD_CEILING_MS


def debounce_ms(
    *,
    invoked: bool,
    cadence_ms: float,
    line_prefix: str,
    line_suffix: str,
    ttft_ms: float | None,
    floor_ms: float,
    ceiling_ms: float,
) -> float:
    """The wait in milliseconds before the upstream request (see module doc)."""
    if invoked:
        return 0.0
    f = context_factor(line_prefix, line_suffix)
    wait = 1.5 * cadence_ms * f
    if ttft_ms:
        wait = max(wait, 0.25 * ttft_ms * f)
    return max(floor_ms, min(ceiling_ms, wait))


async def superseded_within(req, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` seconds (the debounce) for ``req.superseded``; True when
    a newer request came. The wait is added to ``req.waited_s``."""
    t = time.perf_counter()
    try:
        await asyncio.wait_for(req.superseded.wait(), timeout_s)
    except TimeoutError:
        return False
    finally:
        req.waited_s += time.perf_counter() - t
    return True
