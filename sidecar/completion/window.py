"""The context window as a latency budget: prefix/suffix windows sized so that a cold
prompt meets a target time to first token.

``prefix_tokens`` and ``suffix_tokens`` (cl100k tokens) are the largest windows; this
module picks the windows actually cut, from what the backend's streams measured.

**Measurements.** After each stream on a warm backend (not one loading its model) the
service records one sample (``WindowBudget.observe``): the prompt tokens the backend had
to evaluate (``new_tokens``), all prompt tokens, and the TTFT in ms. A llama.cpp engine
keeps the KV cache of the prompt beginning it saw last, so the new tokens are those
after the longest beginning shared with the previous prompt sent to the same backend
(``new_text``); when llama-server reports ``timings.prompt_n``/``cache_n`` the share it
evaluated is used instead. All counts are cl100k estimates, like the windows.

**Model.** ``ttft = base + ms_per_token * new_tokens``: ``base`` (fixed cost: HTTP, the
first decode step) is the median TTFT of samples with fewer than
``SMALL_PROMPT_TOKENS`` new tokens (0 when there are fewer than 2), ``ms_per_token``
the median of ``(ttft - base) / new_tokens`` over samples with at least
``LARGE_PROMPT_TOKENS`` new tokens (at least ``MIN_LARGE_SAMPLES`` of them, else no
model and the windows stay where they are). Medians, because a request queued behind a
prefetch on a one-slot engine measures the queue, not the prompt. The last
``MAX_SAMPLES`` samples count.

**Rule.** The prefix window takes the levels ``FLOOR_TOKENS`` (or ``prefix_tokens`` if
smaller), then multiples of ``STEP_TOKENS``, up to ``prefix_tokens``; the suffix window
is ``prefix * suffix_tokens / prefix_tokens`` (rounded up, at most ``suffix_tokens``). A
level's predicted cold TTFT is ``base + ms_per_token * (prefix + suffix)``. The target is
``target_ttft_ms`` (default: ``LOCAL_TARGET_TTFT_MS`` = 300 ms on a local backend; a
cloud backend's TTFT is mostly network and queue, so there the budget is off unless
the setting is given; 0 turns it off everywhere: the windows are the maxima). The
target doubles (``REUSE_STRETCH``) while at least ``REUSE_SHARE`` of the recent prompts
evaluated under a quarter of their tokens: with the KV cache reused, only a jump or a
16-line block shift pays for a cold prompt. Prompt-processing gets at least half the
target even when ``base`` alone is near it.

**Prior.** Before there are enough samples, a *prior* slope may stand in for the model
(``set_prior``; base 0): the managed engine's start-up warm-up prompt, its whole time
over its prompt tokens (decoding and first-touch included, so it over-estimates the
cost: the first prompt of a session errs small, and the samples correct it). Without
one the first prompts of a session are cut at the maxima, which on a 2-core CPU meant
a first prompt of ~1,300 tokens and ~8 s before the first suggestion.

**Hysteresis.** Windows start at the maxima (or at the prior's choice, at once). They shrink only when the current level's
prediction is over the target by more than ``HYSTERESIS`` (15 %), to the largest level
that meets the target; they grow only when the next level up is predicted under the
target by more than 15 %, to the largest such level; and they change at most once per
``MIN_CHANGE_INTERVAL_S`` (30 s). Every change breaks the KV-cache-friendly prompt
beginning and the cache keys once, so it must be rare.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

STEP_TOKENS = 128
FLOOR_TOKENS = 256
LOCAL_TARGET_TTFT_MS = 300
SMALL_PROMPT_TOKENS = 128
LARGE_PROMPT_TOKENS = 256
MIN_LARGE_SAMPLES = 3
MAX_SAMPLES = 32
HYSTERESIS = 0.15
MIN_CHANGE_INTERVAL_S = 30.0
REUSE_SHARE = 0.75
REUSE_STRETCH = 2.0


def target_ms(setting: int | None, local: bool) -> int:
    """The target cold TTFT in ms: ``target_ttft_ms`` when set (0: off), else
    ``LOCAL_TARGET_TTFT_MS`` for a local backend and 0 (off) for a cloud one."""
    if setting is not None:
        return max(0, setting)
    return LOCAL_TARGET_TTFT_MS if local else 0


def common_prefix_len(a: str, b: str) -> int:
    """Length in characters of the longest common beginning of ``a`` and ``b``."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt text of a request body, in the order an engine evaluates it (close
    enough for llama.cpp's prefix reuse): ``input_extra``, ``prompt`` /
    ``input_prefix``, ``suffix`` / ``input_suffix``, chat message contents."""
    parts: list[str] = []
    for item in body.get("input_extra") or ():
        if isinstance(item, dict):
            parts.append(str(item.get("filename", "")))
            parts.append(str(item.get("text", "")))
    for key in ("prompt", "input_prefix", "suffix", "input_suffix"):
        v = body.get(key)
        if isinstance(v, str):
            parts.append(v)
    for m in body.get("messages") or ():
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            parts.append(m["content"])
    return "\x00".join(parts)


@dataclass(frozen=True)
class Sample:
    """One stream: cl100k tokens evaluated (``new_tokens``) of ``total_tokens``, TTFT in ms."""

    new_tokens: int
    total_tokens: int
    ttft_ms: float


class WindowBudget:
    """Measured prompt cost of one backend and the windows it allows (module doc)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.samples: deque[Sample] = deque(maxlen=MAX_SAMPLES)
        self._prefix: int | None = None  # current prefix window; None: the maximum
        self._changed_at: float | None = None
        self._dirty = False
        self._last_prompt = ""
        self.changes = 0
        self.prior_ms_per_token: float | None = None

    def set_prior(self, ms_per_token: float) -> None:
        """Use ``ms_per_token`` (ms per prompt token, > 0) with base 0 as the model until
        there are enough samples (module doc, "Prior"); the next ``windows`` call may
        move the windows at once."""
        if ms_per_token > 0:
            self.prior_ms_per_token = float(ms_per_token)
            self._dirty = True

    # ----------------------------------------------------------- measurements
    def new_text(self, prompt: str) -> str:
        """The part of ``prompt`` after the beginning it shares with the previous prompt
        (what a llama.cpp engine evaluates); remembers ``prompt`` as the previous one."""
        common = common_prefix_len(prompt, self._last_prompt)
        self._last_prompt = prompt
        return prompt[common:]

    def observe(self, new_tokens: int, total_tokens: int, ttft_ms: float) -> None:
        """Record one stream: ``new_tokens`` of ``total_tokens`` (cl100k) evaluated, first
        token after ``ttft_ms`` ms."""
        if ttft_ms is None or ttft_ms < 0 or total_tokens <= 0:
            return
        self.samples.append(Sample(max(0, min(new_tokens, total_tokens)), total_tokens, float(ttft_ms)))
        self._dirty = True

    def model(self) -> tuple[float, float] | None:
        """``(base_ms, ms_per_token)``; the prior (base 0) or None until there are enough
        large samples."""
        large = [s for s in self.samples if s.new_tokens >= LARGE_PROMPT_TOKENS]
        if len(large) < MIN_LARGE_SAMPLES:
            return None if self.prior_ms_per_token is None else (0.0, self.prior_ms_per_token)
        small = [s.ttft_ms for s in self.samples if s.new_tokens < SMALL_PROMPT_TOKENS]
        base = statistics.median(small) if len(small) >= 2 else 0.0
        slope = statistics.median(max(0.0, s.ttft_ms - base) / s.new_tokens for s in large)
        return base, slope

    def reuse_share(self) -> float:
        """Share of recent prompts that evaluated under a quarter of their tokens."""
        if not self.samples:
            return 0.0
        return sum(1 for s in self.samples if s.new_tokens * 4 < s.total_tokens) / len(self.samples)

    # ----------------------------------------------------------- windows
    def windows(self, max_prefix: int, max_suffix: int, target: int) -> tuple[int, int]:
        """``(prefix_tokens, suffix_tokens)`` to cut now, for maxima ``max_prefix`` /
        ``max_suffix`` and a target cold TTFT of ``target`` ms (0: the maxima)."""
        if target <= 0 or max_prefix <= 0:
            self._prefix = None
            return max_prefix, max_suffix
        levels = self.levels(max_prefix)
        current = self._prefix if self._prefix in levels else max_prefix
        if self._dirty:
            self._dirty = False
            wanted = self._decide(current, levels, max_prefix, max_suffix, target)
            if wanted != current:
                now = self._clock()
                if self._changed_at is None or now - self._changed_at >= MIN_CHANGE_INTERVAL_S:
                    self._changed_at = now
                    self.changes += 1
                    current = wanted
        self._prefix = current
        return current, self.suffix_for(current, max_prefix, max_suffix)

    @staticmethod
    def levels(max_prefix: int) -> list[int]:
        """The prefix window sizes allowed for maximum ``max_prefix``, ascending."""
        floor = min(FLOOR_TOKENS, max_prefix)
        out = [floor] + [n for n in range(STEP_TOKENS, max_prefix, STEP_TOKENS) if n > floor]
        if out[-1] != max_prefix:
            out.append(max_prefix)
        return out

    @staticmethod
    def suffix_for(prefix: int, max_prefix: int, max_suffix: int) -> int:
        return min(max_suffix, math.ceil(prefix * max_suffix / max_prefix)) if max_prefix else max_suffix

    def predict_ms(self, prefix: int, max_prefix: int, max_suffix: int) -> float | None:
        """Predicted cold TTFT (ms) of prefix window ``prefix`` and its suffix window."""
        m = self.model()
        if m is None:
            return None
        base, slope = m
        return base + slope * (prefix + self.suffix_for(prefix, max_prefix, max_suffix))

    def _decide(self, current: int, levels: list[int], max_prefix: int, max_suffix: int, target: int) -> int:
        m = self.model()
        if m is None:
            return current
        base, slope = m
        goal = target * (REUSE_STRETCH if self.reuse_share() >= REUSE_SHARE else 1.0)
        goal = max(goal, base + goal / 2)  # prompt processing gets at least half the target

        def predict(p: int) -> float:
            return base + slope * (p + self.suffix_for(p, max_prefix, max_suffix))

        if predict(current) > goal * (1 + HYSTERESIS):
            fitting = [p for p in levels if predict(p) <= goal]
            return fitting[-1] if fitting else levels[0]
        above = [p for p in levels if p > current]
        if above and predict(above[0]) <= goal * (1 - HYSTERESIS):
            return [p for p in levels if predict(p) <= goal * (1 - HYSTERESIS)][-1]
        return current
