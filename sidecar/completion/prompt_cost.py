"""What a prompt costs the engine, measured: the samples of the window budget
(``window.py``) and the cost model fitted to them.

**Measurements.** After each stream on a warm backend (not one loading its model) one
sample is recorded (``stream_record.py``, ``ContextBudget.observe``): the prompt tokens the
backend had to evaluate (``new_tokens``), all prompt tokens, and the TTFT in ms. A llama.cpp engine
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

**Prior.** Before there are enough samples, a *prior* slope may stand in for the model
(``set_prior``; base 0): the managed engine's start-up warm-up prompt, its whole time
over its prompt tokens (decoding and first-touch included, so it over-estimates the
cost: the first prompt of a session errs small, and the samples correct it). Without
one the first prompts of a session are cut at the maxima, which on a 2-core CPU meant
a first prompt of ~1,300 tokens and ~8 s before the first suggestion.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Any

SMALL_PROMPT_TOKENS = 128
LARGE_PROMPT_TOKENS = 256
MIN_LARGE_SAMPLES = 3
MAX_SAMPLES = 32


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


class PromptCost:
    """The measured prompt cost of one backend and model (module doc). ``changed`` is
    set by every new sample or prior, for the window budget to decide again."""

    def __init__(self) -> None:
        self.samples: deque[Sample] = deque(maxlen=MAX_SAMPLES)
        self.prior_ms_per_token: float | None = None
        self.changed = False
        self._last_prompt = ""

    def set_prior(self, ms_per_token: float) -> None:
        """Use ``ms_per_token`` (ms per prompt token, > 0) with base 0 as the model until
        there are enough samples (module doc, "Prior")."""
        if ms_per_token > 0:
            self.prior_ms_per_token = float(ms_per_token)
            self.changed = True

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
        self.changed = True

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
