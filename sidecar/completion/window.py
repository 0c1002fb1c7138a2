"""The context window as a latency budget: a suffix window sized so that a key costs
the engine no more than a target time to first token, and a prefix window sized so
that a jump to a new place costs no more than a few times that.

``prefix_tokens`` and ``suffix_tokens`` (cl100k tokens) are the largest windows; this
module picks the windows actually cut, from what the backend's streams measured.

The samples and the cost model fitted to them (``base`` ms plus ``ms_per_token`` per
new prompt token, or a prior before there are enough) are ``prompt_cost.py``'s.

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

**Hysteresis.** Windows start at the maxima (or at the prior's choice, at once). Each
window shrinks only when its current level's prediction is over its target by more
than ``HYSTERESIS`` (15 %), to the largest level that meets the target; it grows only
when the next level up is predicted under the target by more than 15 %, to the largest
such level; and the windows change at most once per ``MIN_CHANGE_INTERVAL_S`` (30 s). Every change breaks the KV-cache-friendly prompt
beginning and the cache keys once, so it must be rare.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .prompt_cost import PromptCost

PREFIX_STEP_TOKENS = 128
PREFIX_FLOOR_TOKENS = 512
SUFFIX_STEP_TOKENS = 64
SUFFIX_FLOOR_TOKENS = 64
STARTING_PREFIX_TOKENS = 128  # while the managed engine starts (context_budget.py)
COLD_STRETCH = 4.0
LOCAL_TARGET_TTFT_MS = 300
HYSTERESIS = 0.15
MIN_CHANGE_INTERVAL_S = 30.0


def target_ms(setting: int | None, local: bool) -> int:
    """The key target TTFT in ms: ``target_ttft_ms`` when set (0: off), else
    ``LOCAL_TARGET_TTFT_MS`` for a local backend and 0 (off) for a cloud one."""
    if setting is not None:
        return max(0, setting)
    return LOCAL_TARGET_TTFT_MS if local else 0


class WindowBudget(PromptCost):
    """The windows one backend's measured prompt cost (:class:`PromptCost`) allows
    (module doc)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self._clock = clock
        self._windows: tuple[int, int] | None = None  # current (prefix, suffix); None: the maxima
        self._changed_at: float | None = None
        self.changes = 0

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
        if self.changed:  # a new sample or prior: decide again
            self.changed = False
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

    def _decide(
        self, current: tuple[int, int], pre_levels: list[int], suf_levels: list[int], target: int
    ) -> tuple[int, int]:
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
