"""The benchmark's typist: a seeded model of a person writing code key by key.

Pure code, no I/O. For one file it picks the region that is "being written", splits it
into key presses (one character each; Enter carries the next line's indentation, as an
auto-indenting editor inserts it; see :func:`sidecar.tools.demo.typist.split_keys`) and draws
the wait before every key. The same seed always gives the same plan, so the sidecar run
and the naive run of one benchmark see the same keys at the same intervals (a key that
one run skips by accepting a suggestion is simply not typed there).

Where the numbers come from
---------------------------
* **Inter-key interval (IKI): log-normal, median 140 ms, sigma 0.45** (mean about
  155 ms). Dhakal, Feit, Kristensson and Oulasvirta, "Observations on Typing from 136
  Million Keystrokes", CHI 2018, measured 168,000 volunteers transcribing sentences:
  the mean IKI is about 240 ms for the average participant, and the fastest typists
  sit around 120-150 ms. IKI distributions are right-skewed, which a log-normal
  captures with two parameters. We model a practised typist (programmers type all
  day) at the slow end of the fast group; a faster typist only makes the stream of
  superseded keystroke requests denser.
* **Pause at a line end: an extra log-normal wait, median 600 ms, sigma 0.5**
  (about 320 ms to 1.1 s for 80% of lines), taken after Enter, before the first
  character of the new line: the moment a person decides what the next line says and
  the moment an editor shows a whole-line suggestion. This is our assumption, not a
  figure from the paper (which studied transcription, not composition); "a few hundred
  ms" between lines is the brief's guidance.
* **Occasional long pause: with probability 2% before a key that starts a new token,
  an extra 1-3 s (uniform)**, a person stopping to think or to read code. Also an
  assumption. It gives roughly one long pause every 50 keys.

The time-to-suggestion at a pause is measured by the bench, not here: a pause is any
planned line-end or long pause, and lasts the whole wait before the next key.

Units: durations in seconds (``*_s``) unless a name ends in ``_ms``; offsets are code
point indices into the true file text.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from sidecar.tools.demo.typist import split_keys

PAUSE_LINE_END = "line_end"
PAUSE_LONG = "long"


@dataclass(frozen=True)
class TypistModel:
    """Timing parameters of the typist (see the module doc for the sources)."""

    iki_median_ms: float = 140.0
    iki_sigma: float = 0.45
    line_end_median_ms: float = 600.0
    line_end_sigma: float = 0.5
    long_pause_p: float = 0.02
    long_pause_min_s: float = 1.0
    long_pause_max_s: float = 3.0

    def __post_init__(self) -> None:
        if self.iki_median_ms <= 0 or self.line_end_median_ms < 0:
            raise ValueError("typing intervals must be positive")
        if not 0 <= self.long_pause_p <= 1:
            raise ValueError("long_pause_p must be in [0, 1]")
        if not 0 <= self.long_pause_min_s <= self.long_pause_max_s:
            raise ValueError("long pause bounds must satisfy 0 <= min <= max")


@dataclass(frozen=True)
class Key:
    """One key press: ``text[start:end]`` of the true file, typed ``delay_s`` after the
    previous key. ``pause`` is ``""``, ``"line_end"`` or ``"long"`` when the wait before
    this key is a pause (the typist looks at the screen for a suggestion)."""

    start: int
    end: int
    delay_s: float
    pause: str = ""


@dataclass(frozen=True)
class FilePlan:
    """What the typist writes in one file.

    ``text`` is the true file; ``start``/``end`` the region that is typed (``start`` at
    a line start, ``end`` just after the last non-blank character of a line, so the
    document after the cursor always starts with a line break); ``keys`` the key
    presses covering the region in order.
    """

    path: str
    language: str
    text: str
    start: int
    end: int
    keys: tuple[Key, ...]

    @property
    def name(self) -> str:
        return Path(self.path).name

    @property
    def opened_text(self) -> str:
        """The document as opened: the true file without the region."""
        return self.text[: self.start] + self.text[self.end :]

    def document_at(self, cursor: int) -> str:
        """The document when the region is written up to ``cursor`` (true file offset)."""
        return self.text[:cursor] + self.text[self.end :]

    def key_index_at(self, cursor: int) -> int:
        """Index of the key that types the character at ``cursor`` (len(keys) at the end)."""
        lo, hi = 0, len(self.keys)
        while lo < hi:  # first key whose end is past the cursor
            mid = (lo + hi) // 2
            if self.keys[mid].end <= cursor:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @property
    def first_line(self) -> int:
        return self.text.count("\n", 0, self.start) + 1

    @property
    def last_line(self) -> int:
        return self.text.count("\n", 0, self.end) + 1

    @property
    def pause_count(self) -> int:
        return sum(1 for k in self.keys if k.pause)

    @property
    def typing_time_s(self) -> float:
        return sum(k.delay_s for k in self.keys)


def _key_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    spans = []
    at = start
    for key in split_keys(text[start:end]):
        spans.append((at, at + len(key)))
        at += len(key)
    return spans


def _content_end(text: str, start: int, stop: int) -> int:
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    return stop


def choose_region(text: str, keystrokes: int, seed: int = 0, name: str = "") -> tuple[int, int]:
    """Pick the typed region: it starts at a block start (a non-blank line after a blank
    one, at any indentation) past the first fifth of the file and ends at the end of the
    line where the ``keystrokes``-th key falls. Deterministic by seed; a file too short
    for ``keystrokes`` gives the longest region it has."""
    if keystrokes < 1:
        raise ValueError("keystrokes must be at least 1")
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    blocks = [i for i in range(1, len(lines)) if lines[i].strip() and not lines[i - 1].strip()]
    if not blocks:
        blocks = [i for i, line in enumerate(lines) if line.strip()]
    if not blocks:
        raise ValueError("the file has nothing to type")
    first_allowed = len(lines) // 5
    candidates = [i for i in blocks if i >= first_allowed] or blocks
    full: list[tuple[int, int]] = []
    longest: tuple[int, int] | None = None
    for i in candidates:
        begin = starts[i]
        stop = _content_end(text, begin, len(text))
        spans = _key_spans(text, begin, stop)
        if not spans:
            continue
        if len(spans) >= keystrokes:
            after = spans[keystrokes - 1][1]
            nl = text.find("\n", after)
            stop = _content_end(text, begin, len(text) if nl < 0 else nl)
            full.append((begin, stop))
        elif longest is None or stop - begin > longest[1] - longest[0]:
            longest = (begin, stop)
    if full:
        return random.Random(f"sidecar-bench:{seed}:{name}:region").choice(full)
    if longest is None:
        raise ValueError("the file has nothing to type")
    return longest


def _starts_token(text: str, at: int) -> bool:
    """True when the character at ``at`` begins a new token (not the middle of a word)."""
    if at == 0:
        return True
    prev, cur = text[at - 1], text[at]
    word = lambda c: c.isalnum() or c == "_"  # noqa: E731
    return not (word(prev) and word(cur))


def plan_file(
    path: str | Path, text: str, language: str, keystrokes: int = 300, seed: int = 0, model: TypistModel | None = None
) -> FilePlan:
    """Plan how the typist writes about ``keystrokes`` keys of ``text`` (see module doc)."""
    model = model or TypistModel()
    name = Path(path).name
    start, end = choose_region(text, keystrokes, seed, name)
    rng = random.Random(f"sidecar-bench:{seed}:{name}:timing")
    keys: list[Key] = []
    spans = _key_spans(text, start, end)
    for k, (a, b) in enumerate(spans):
        # Draw the same numbers for every key, whatever branch is taken, so that one
        # parameter change does not reshuffle every later interval.
        iki = rng.lognormvariate(math.log(model.iki_median_ms), model.iki_sigma) / 1000.0
        line_end = rng.lognormvariate(math.log(max(model.line_end_median_ms, 1e-3)), model.line_end_sigma) / 1000.0
        long_roll = rng.random()
        long_len = rng.uniform(model.long_pause_min_s, model.long_pause_max_s)
        delay, pause = iki, ""
        if k > 0 and not text.startswith("\n", a):
            if "\n" in text[spans[k - 1][0] : spans[k - 1][1]] and model.line_end_median_ms > 0:
                delay, pause = iki + line_end, PAUSE_LINE_END
            elif long_roll < model.long_pause_p and _starts_token(text, a):
                delay, pause = iki + long_len, PAUSE_LONG
        keys.append(Key(a, b, delay, pause))
    return FilePlan(str(path), language, text, start, end, tuple(keys))
