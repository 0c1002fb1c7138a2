"""A backend's cool-down after it said "too many requests" (429) or "overloaded" (503).

One job: per backend, decide whether a stream may go upstream now. A team on one engine
(or one SiliconFlow key) hits its limits; a client that keeps sending one request per
keystroke through a 429 only makes the window longer for everyone.

- **Retry-After** (RFC 9110 §10.2.3) is honoured in both forms, ``delay-seconds`` and
  ``HTTP-date``; so are ``retry-after-ms`` (milliseconds, sent by OpenAI and Azure) and a
  body that says how long to wait ("try again in 20s", "retry after 3 seconds").
  SiliconFlow documents no header (docs/architecture.md, "Facts we checked"): its 429 names the limit (RPM, TPM, ...)
  and its 503 carries code 50505; both start the exponential back-off below.
- Without a stated time the back-off is exponential with jitter: 1 s after the first
  failure, doubling up to 60 s, each wait multiplied by a random factor in [0.8, 1.2].
- Inside the window no request goes upstream, except one probe once a window has lasted
  ``probe_after_s`` (60 s), so that a very long Retry-After is checked once.
- After the window the next request goes out at once; a success ends the episode (the
  back-off starts from 1 s again). The service shows one message per episode.

Times are seconds of ``clock()`` (``time.monotonic`` by default); ``now_wall()`` gives
POSIX seconds for HTTP-dates. Both are injectable for tests.
"""

from __future__ import annotations

import datetime as _dt
import math
import random
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

#: The back-off without a stated time: first wait, largest wait (s), and jitter fraction.
BASE_BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
JITTER = 0.2
#: A stated wait longer than this is cut to it (s): a misconfigured proxy must not silence
#: completions for a day.
MAX_RETRY_AFTER_S = 3600.0
#: A window this old (s) lets one probe through.
PROBE_AFTER_S = 60.0

_DELAY_SECONDS = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*$")
_BODY_WAIT = re.compile(
    r"(?:try\s+again|retry)\s+(?:in|after)\s+(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?)\b",
    re.IGNORECASE,
)


def parse_retry_after(value: str | None, now_wall: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (RFC 9110 §10.2.3), or None when it is
    absent or unreadable.

    ``delay-seconds`` (``"12"``; a fraction such as ``"1.5"`` is accepted too) is taken as
    it is; an ``HTTP-date`` (``"Wed, 21 Oct 2015 07:28:00 GMT"``, also the obsolete RFC 850
    and asctime forms) gives the seconds from ``now_wall()`` (POSIX seconds) to that date,
    0 for a date in the past.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    m = _DELAY_SECONDS.match(text)
    if m:
        return float(m.group(1))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        when = None
    if when is None:
        return None
    if when.tzinfo is None:  # HTTP-dates are UTC (RFC 9110 §5.6.7)
        when = when.replace(tzinfo=_dt.UTC)
    return max(0.0, when.timestamp() - now_wall())


def retry_after_s(
    headers: Mapping[str, str] | None, message: str = "", now_wall: Callable[[], float] = time.time
) -> float | None:
    """The wait (seconds) an error answer asks for: ``Retry-After`` (RFC 9110 §10.2.3),
    else ``retry-after-ms`` (milliseconds), else a body ``message`` such as "Please try
    again in 20s"; None when none of them says. Header names are case-insensitive."""
    if headers is not None:
        get = getattr(headers, "get", None)
        value = get("retry-after") if get else None
        if value is None and get:
            value = get("Retry-After")
        wait = parse_retry_after(value, now_wall)
        if wait is not None:
            return wait
        ms = (get("retry-after-ms") or get("Retry-After-Ms")) if get else None
        if ms is not None:
            m = _DELAY_SECONDS.match(ms)
            if m:
                return float(m.group(1)) / 1000.0
    if message:
        m = _BODY_WAIT.search(message)
        if m:
            n = float(m.group(1))
            return n / 1000.0 if m.group(2).lower().startswith("m") else n
    return None


class CoolDown:
    """The cool-down state of one backend (see the module doc).

    Call :meth:`admit` right before a stream goes upstream (False: do not send it),
    :meth:`failure` after a 429 or 503 and :meth:`success` after an answer that was not
    one. ``clock`` returns seconds (monotonic); ``rand`` returns a float in [0, 1) for the
    jitter. ``base_s``/``max_s`` (seconds) bound the back-off without a stated time,
    ``jitter`` is its +- fraction, ``probe_after_s`` (seconds) the age of a window that
    lets one probe through.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
        base_s: float = BASE_BACKOFF_S,
        max_s: float = MAX_BACKOFF_S,
        jitter: float = JITTER,
        probe_after_s: float = PROBE_AFTER_S,
    ) -> None:
        self._clock = clock
        self._rand = rand
        self.base_s = base_s
        self.max_s = max_s
        self.jitter = jitter
        self.probe_after_s = probe_after_s
        self._until = 0.0
        self._started = 0.0
        self._failures = 0
        self._episode = False
        self._probed = False
        #: Requests refused by :meth:`admit` in this process (a diagnostic).
        self.refused = 0

    # ------------------------------------------------------------------ reading
    def remaining_s(self) -> float:
        """Seconds left in the current window (0 outside one)."""
        return max(0.0, self._until - self._clock())

    @property
    def limited(self) -> bool:
        """True inside a window: requests wait (except one probe)."""
        return self.remaining_s() > 0

    @property
    def in_episode(self) -> bool:
        """True from the first 429/503 until the next success (the window may be over):
        speculative work (prefetch) waits for the user's own requests to succeed."""
        return self._episode

    @property
    def failures(self) -> int:
        """429/503 answers since the last success."""
        return self._failures

    # ------------------------------------------------------------------ changing
    def admit(self) -> bool:
        """May a stream go upstream now? True outside a window; inside one True only once,
        for a probe, after the window has lasted ``probe_after_s``."""
        now = self._clock()
        if now >= self._until:
            return True
        if not self._probed and now - self._started >= self.probe_after_s:
            self._probed = True
            return True
        self.refused += 1
        return False

    def failure(self, retry_after: float | None = None) -> bool:
        """A 429 or 503 arrived. ``retry_after`` (seconds, e.g. from
        :func:`retry_after_s`) sets the window; None backs off exponentially with jitter.
        Returns True when this failure starts an episode (the one to tell the user about).
        """
        now = self._clock()
        first = not self._episode
        self._episode = True
        self._failures += 1
        if retry_after is not None and math.isfinite(retry_after):
            wait = min(max(0.0, retry_after), MAX_RETRY_AFTER_S)
        else:
            wait = min(self.max_s, self.base_s * 2 ** (self._failures - 1))
            wait *= 1.0 + self.jitter * (2.0 * self._rand() - 1.0)
        self._until = now + wait
        self._started = now
        self._probed = False
        return first

    def success(self) -> None:
        """An answer that was not a 429/503. Ends the episode, unless it belongs to a
        request sent before the window began and the window is still running (then it
        says nothing about now); a probe's success ends it too."""
        if self._clock() < self._until and not self._probed:
            return
        self._until = 0.0
        self._failures = 0
        self._episode = False
        self._probed = False


__all__ = ["CoolDown", "parse_retry_after", "retry_after_s"]
