"""The context window as a latency budget: a suffix window sized so that a key costs
the engine no more than a target time to first token, and a prefix window sized so
that a jump to a new place costs no more than a few times that.

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

**Rule: two costs, two windows.** In the prefix-suffix-middle order the suffix comes
after the cursor, so every key makes the engine evaluate the suffix window again, while
the prefix window's start snaps to a block boundary (``context.py``) and stays in the KV
cache as long as the user types in that block: the prefix is paid once per place, the
suffix after every key. So:

- the **suffix window** is the largest suffix level (``SUFFIX_FLOOR_TOKENS``, then
  multiples of ``SUFFIX_STEP_TOKENS``, up to ``suffix_tokens``) whose predicted cost
  ``base + ms_per_token * suffix`` meets the *key target*, ``target_ttft_ms`` (default
  ``LOCAL_TARGET_TTFT_MS`` = 300 ms on a local backend; a cloud backend's TTFT is mostly
  network and queue, so there the budget is off unless the setting is given; 0 turns it
  off everywhere: the windows are the maxima). Prompt processing gets at least half the
  target even when ``base`` alone is near it.
- the **prefix window** is the largest prefix level (``PREFIX_FLOOR_TOKENS``, then
  multiples of ``PREFIX_STEP_TOKENS``, up to ``prefix_tokens``) whose cold prompt, prefix
  plus that suffix, is predicted to meet the *cold target*, ``COLD_STRETCH`` times the
  key target (1.2 s at the default): a jump to a new place.
- The floors are quality floors, measured (``python -m devtools.bench quality``, Qwen2.5-Coder-0.5B,
  80 holes, 2-core CPU, docs/architecture.md): a 256-token prefix was right on the first
  line 38% of the time, 512 tokens 42%; the suffix at 32, 64 and 128 tokens 38, 38 and
  40% while each suffix token costs every key. On that CPU both floors hold (~4.5 ms a
  token); a GPU gets the maxima.

**Prior.** Before there are enough samples, a *prior* slope may stand in for the model
(``set_prior``; base 0): the managed engine's start-up warm-up prompt, its whole time
over its prompt tokens (decoding and first-touch included, so it over-estimates the
cost: the first prompt of a session errs small, and the samples correct it). Without
one the first prompts of a session are cut at the maxima, which on a 2-core CPU meant
a first prompt of ~1,300 tokens and ~8 s before the first suggestion.

**Hysteresis.** Windows start at the maxima (or at the prior's choice, at once). Each
window shrinks only when its current level's prediction is over its target by more
than ``HYSTERESIS`` (15 %), to the largest level that meets the target; it grows only
when the next level up is predicted under the target by more than 15 %, to the largest
such level; and the windows change at most once per ``MIN_CHANGE_INTERVAL_S`` (30 s). Every change breaks the KV-cache-friendly prompt
beginning and the cache keys once, so it must be rare.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

PREFIX_STEP_TOKENS = 128
PREFIX_FLOOR_TOKENS = 512
SUFFIX_STEP_TOKENS = 64
SUFFIX_FLOOR_TOKENS = 64
STARTING_PREFIX_TOKENS = 256  # while the managed engine starts (context_budget.py)
COLD_STRETCH = 4.0
LOCAL_TARGET_TTFT_MS = 300
SMALL_PROMPT_TOKENS = 128
LARGE_PROMPT_TOKENS = 256
MIN_LARGE_SAMPLES = 3
MAX_SAMPLES = 32
HYSTERESIS = 0.15
MIN_CHANGE_INTERVAL_S = 30.0


def target_ms(setting: int | None, local: bool) -> int:
    """The key target TTFT in ms: ``target_ttft_ms`` when set (0: off), else
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
        self._windows: tuple[int, int] | None = None  # current (prefix, suffix); None: the maxima
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

    # ----------------------------------------------------------- windows
    def windows(self, max_prefix: int, max_suffix: int, target: int) -> tuple[int, int]:
        """``(prefix_tokens, suffix_tokens)`` to cut now, for maxima ``max_prefix`` /
        ``max_suffix`` (cl100k tokens) and a key target of ``target`` ms (0: the maxima);
        module doc, "Rule" and "Hysteresis"."""
        if target <= 0 or max_prefix <= 0:
            self._windows = None
            return max_prefix, max_suffix
        pre_levels, suf_levels = self.levels(max_prefix), self.suffix_levels(max_suffix)
        current = self._windows
        if current is None or current[0] not in pre_levels or current[1] not in suf_levels:
            current = (max_prefix, max_suffix)
        if self._dirty:
            self._dirty = False
            wanted = self._decide(current, pre_levels, suf_levels, target)
            if wanted != current:
                now = self._clock()
                if self._changed_at is None or now - self._changed_at >= MIN_CHANGE_INTERVAL_S:
                    self._changed_at = now
                    self.changes += 1
                    current = wanted
        self._windows = current
        return current

    @staticmethod
    def levels(max_prefix: int) -> list[int]:
        """The prefix window sizes (cl100k tokens) allowed for maximum ``max_prefix``,
        ascending: ``PREFIX_FLOOR_TOKENS`` (or the maximum, if smaller), then multiples
        of ``PREFIX_STEP_TOKENS``, then the maximum."""
        return _levels(max_prefix, PREFIX_FLOOR_TOKENS, PREFIX_STEP_TOKENS)

    @staticmethod
    def suffix_levels(max_suffix: int) -> list[int]:
        """The suffix window sizes allowed for maximum ``max_suffix`` (``[0]`` for 0)."""
        return _levels(max_suffix, SUFFIX_FLOOR_TOKENS, SUFFIX_STEP_TOKENS)

    def _decide(self, current: tuple[int, int], pre_levels: list[int], suf_levels: list[int],
                target: int) -> tuple[int, int]:
        m = self.model()
        if m is None:
            return current
        base, slope = m
        key_goal = max(target, base + target / 2)  # prompt processing gets at least half the target
        suffix = _pick(current[1], suf_levels, lambda s: base + slope * s, key_goal)
        prefix = _pick(current[0], pre_levels, lambda p: base + slope * (p + suffix), key_goal * COLD_STRETCH)
        return prefix, suffix


def _levels(maximum: int, floor: int, step: int) -> list[int]:
    low = min(floor, maximum)
    out = [low] + [n for n in range(step, maximum, step) if n > low]
    if out[-1] != maximum:
        out.append(maximum)
    return out


def _pick(current: int, levels: list[int], cost: Callable[[int], float], goal: float) -> int:
    """The level to move to from ``current`` for predicted ``cost`` (ms) and ``goal`` (ms),
    with ``HYSTERESIS`` (module doc)."""
    if current not in levels:
        current = levels[-1]
    if cost(current) > goal * (1 + HYSTERESIS):
        fitting = [n for n in levels if cost(n) <= goal]
        return fitting[-1] if fitting else levels[0]
    above = [n for n in levels if n > current]
    if above and cost(above[0]) <= goal * (1 - HYSTERESIS):
        return [n for n in levels if cost(n) <= goal * (1 - HYSTERESIS)][-1]
    return current
