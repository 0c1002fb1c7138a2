"""Request and token limits of the simulated backend, as a shared account has them.

SiliconFlow limits each key per minute in requests (RPM) and tokens (TPM) and answers a
request over a limit with 429 and a message naming it (docs/architecture.md, "Facts we checked"). The simulator
counts the generation requests it admitted in the last 60 seconds; one that would pass a
limit is answered 429 with SiliconFlow's body and, unless turned off, a ``Retry-After``
header (RFC 9110 §10.2.3, delay-seconds): the whole seconds until enough of the window
has expired, or a fixed value.

Tokens of a request are its prompt's (``prompt``, ``suffix``, ``input_prefix``,
``input_suffix``, chat ``messages``) plus the output it asks for at most (``max_tokens``,
``n_predict``, ``options.num_predict``), counted at admission.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .faults import SILICONFLOW_ERRORS
from .tokens import count_tokens

WINDOW_S = 60.0


@dataclass(frozen=True)
class Refusal:
    """A request over a limit: the answer to send."""

    status: int
    body: Any
    headers: tuple[tuple[str, str], ...]
    limit: str  # "RPM" or "TPM"


def request_tokens(body: dict | None) -> int:
    """Prompt tokens plus the most output tokens ``body`` asks for (see the module doc)."""
    if not isinstance(body, dict):
        return 0
    text = ""
    for key in ("prompt", "suffix", "input_prefix", "input_suffix"):
        if isinstance(body.get(key), str):
            text += body[key]
    for m in body.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            text += m["content"]
    out = body.get("max_tokens", body.get("n_predict"))
    options = body.get("options")
    if out is None and isinstance(options, dict):
        out = options.get("num_predict")
    out = out if isinstance(out, int) and not isinstance(out, bool) and out > 0 else 16
    return count_tokens(text) + out


class RateLimiter:
    """Sliding one-minute RPM and TPM limits (None: no limit).

    ``retry_after_s`` fixes the ``Retry-After`` value (seconds); None computes it from the
    window. ``send_retry_after`` False sends no header (as SiliconFlow documents).
    ``clock`` returns seconds (monotonic). ``refused`` counts the 429s sent.
    """

    def __init__(
        self,
        rpm: int | None = None,
        tpm: int | None = None,
        *,
        retry_after_s: float | None = None,
        send_retry_after: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, v in (("rpm", rpm), ("tpm", tpm)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise ValueError(f"{name} must be a positive integer or None, got {v!r}")
        if retry_after_s is not None and not retry_after_s >= 0:
            raise ValueError(f"retry_after_s must be >= 0 seconds or None, got {retry_after_s!r}")
        self.rpm = rpm
        self.tpm = tpm
        self.retry_after_s = retry_after_s
        self.send_retry_after = send_retry_after
        self._clock = clock
        self._admitted: deque[tuple[float, int]] = deque()  # (time s, tokens)
        self.refused = 0

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def _expire(self, now: float) -> None:
        while self._admitted and now - self._admitted[0][0] >= WINDOW_S:
            self._admitted.popleft()

    def check(self, body: dict | None) -> Refusal | None:
        """Admit a request (None) or say how to refuse it."""
        if not self.active:
            return None
        now = self._clock()
        self._expire(now)
        cost = request_tokens(body)
        used = sum(t for _at, t in self._admitted)
        limit = None
        if self.rpm is not None and len(self._admitted) + 1 > self.rpm:
            limit = "RPM"
            wait = self._admitted[-self.rpm][0] + WINDOW_S - now if len(self._admitted) >= self.rpm else 0.0
        elif self.tpm is not None and used + cost > self.tpm:
            limit = "TPM"
            wait, freed = WINDOW_S, 0
            for at, t in self._admitted:  # oldest first: when enough tokens have left the window
                freed += t
                if used - freed + cost <= self.tpm:
                    wait = at + WINDOW_S - now
                    break
        if limit is None:
            self._admitted.append((now, cost))
            return None
        self.refused += 1
        status, body_out = SILICONFLOW_ERRORS[f"rate_limit_{limit.lower()}"]
        headers: tuple[tuple[str, str], ...] = ()
        if self.send_retry_after:
            seconds = self.retry_after_s if self.retry_after_s is not None else max(1, math.ceil(wait))
            headers = (("Retry-After", f"{seconds:g}"),)
        return Refusal(status, body_out, headers, limit)

    def reset(self) -> None:
        """Forget the admitted requests (the limits stay)."""
        self._admitted.clear()

    def to_dict(self) -> dict[str, Any]:
        return {
            "rpm": self.rpm,
            "tpm": self.tpm,
            "retry_after_s": self.retry_after_s,
            "send_retry_after": self.send_retry_after,
            "refused": self.refused,
        }
