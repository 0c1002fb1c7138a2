"""A seeded model of a person typing part of a file back in.

Pure code, no I/O: it decides which part of the file is "being written", splits it
into keystrokes, draws the time before each keystroke and chooses where the typist
stops to look for a suggestion. The same seed always gives the same plan.

Units: durations are seconds (``*_s``) unless the name ends in ``_ms``. Offsets
are Python string indices (code points). LSP positions are 0-based lines and
characters counted in UTF-16 code units, as LSP's default position encoding says.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

#: Characters after which a person often stops and waits for the editor.
PAUSE_AFTER = "(.:="

_INDENT = " \t"


def utf16_len(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units (an emoji counts 2)."""
    return len(text.encode("utf-16-le")) // 2


def position_at(text: str, offset: int) -> tuple[int, int]:
    """Return the LSP position ``(line, utf16_character)`` of code-point ``offset``."""
    line = text.count("\n", 0, offset)
    line_start = text.rfind("\n", 0, offset) + 1
    return line, utf16_len(text[line_start:offset])


def offset_at(text: str, line: int, character: int) -> int:
    """Return the code-point offset of the LSP position ``(line, character)``.

    ``character`` is in UTF-16 code units. Raises ``ValueError`` when the position
    is past the end of its line or points into the middle of a surrogate pair.
    """
    start = 0
    for _ in range(line):
        start = text.index("\n", start) + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    units = 0
    offset = start
    while units < character:
        if offset >= end:
            raise ValueError(f"position {line}:{character} is past the end of the line")
        units += 2 if ord(text[offset]) > 0xFFFF else 1
        offset += 1
    if units != character:
        raise ValueError(f"position {line}:{character} splits a surrogate pair")
    return offset


def apply_insert(text: str, line: int, character: int, insert: str) -> str:
    """Apply an LSP insertion (an empty range at ``line:character``) to ``text``."""
    offset = offset_at(text, line, character)
    return text[:offset] + insert + text[offset:]


@dataclass(frozen=True)
class Region:
    """The part of the document that the typist writes, as code-point offsets.

    ``start`` is at the beginning of a line; ``end`` is just after the last
    non-blank character, so the text after the cursor starts with a newline
    (the typist writes on an empty line) or is empty.
    """

    start: int
    end: int


@dataclass(frozen=True)
class Keystroke:
    """One key press, sent as one incremental ``textDocument/didChange``.

    ``delay_s`` is the wait before the press (seconds, already divided by speed).
    ``line``/``character`` is where ``text`` is inserted (UTF-16 units) and
    ``offset`` the same place as a code-point index into the document at that moment.
    ``text`` is one character, or for Enter a newline plus the next line's
    indentation (editors auto-indent). When ``pause`` is true the typist asks for
    a suggestion after this key and reads it for ``look_s`` seconds.
    """

    delay_s: float
    offset: int
    line: int
    character: int
    text: str
    pause: bool = False
    reason: str = ""
    look_s: float = 0.0


@dataclass(frozen=True)
class TypingPlan:
    """Everything the demo needs to replay one typing session."""

    document: str
    region: Region
    keystrokes: tuple[Keystroke, ...]

    @property
    def opened_text(self) -> str:
        """The document as opened: the full text with the region removed."""
        return self.document[: self.region.start] + self.document[self.region.end :]

    @property
    def typed_text(self) -> str:
        """The text the typist writes."""
        return self.document[self.region.start : self.region.end]

    @property
    def pause_count(self) -> int:
        """How many times the typist stops for a suggestion."""
        return sum(1 for k in self.keystrokes if k.pause)

    @property
    def typing_time_s(self) -> float:
        """Seconds spent typing and reading, not counting time waiting for answers."""
        return sum(k.delay_s + k.look_s for k in self.keystrokes)


class TypingModel:
    """Inter-key timing of one typist.

    Key intervals are log-normal with median ``median_ms`` and shape ``sigma``.
    Pressing Enter adds a second log-normal "what comes next" pause with median
    ``line_end_ms``. Reading a suggestion takes a log-normal ``look_ms`` median.
    Everything is divided by ``speed`` (2.0 types twice as fast).
    """

    def __init__(
        self,
        seed: int = 0,
        speed: float = 1.0,
        median_ms: float = 120.0,
        sigma: float = 0.35,
        line_end_ms: float = 450.0,
        look_ms: float = 700.0,
    ) -> None:
        if speed <= 0:
            raise ValueError("speed must be positive")
        self.speed = speed
        self.median_ms = median_ms
        self.sigma = sigma
        self.line_end_ms = line_end_ms
        self.look_ms = look_ms
        self._rng = random.Random(f"sidecar-demo:{seed}:timing")

    def _lognormal_s(self, median_ms: float, sigma: float) -> float:
        return self._rng.lognormvariate(math.log(median_ms), sigma) / 1000.0 / self.speed

    def interval_s(self, text: str) -> float:
        """Seconds before the key press that inserts ``text`` (always > 0)."""
        delay = self._lognormal_s(self.median_ms, self.sigma)
        if text.startswith("\n"):
            delay += self._lognormal_s(self.line_end_ms, 0.5)
        return delay

    def look_s(self) -> float:
        """Seconds spent reading a suggestion before typing on."""
        return self._lognormal_s(self.look_ms, 0.4)


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    if starts[-1] == len(text) and len(starts) > 1:
        starts.pop()  # a final newline does not start a line worth typing
    return starts


def _content_end(text: str, start: int, stop: int) -> int:
    """Offset just after the last non-whitespace character in ``text[start:stop]``."""
    end = stop
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def default_target_chars(pauses: int) -> int:
    """How many characters the typist writes for ``pauses`` stops (about 50 each)."""
    return max(200, min(1500, 50 * pauses))


def choose_region(text: str, pauses: int = 8, seed: int = 0, target_chars: int | None = None) -> Region:
    """Pick the part of ``text`` that the typist writes, deterministically by seed.

    The region starts at a top-level block (a line at column 0 after a blank line,
    e.g. a ``def`` with its decorators) in the last two thirds of the file and runs
    over whole blocks until it holds at least ``target_chars`` characters or the
    file ends. Files without such blocks fall back to the last lines of the file.
    """
    if not text.strip():
        raise ValueError("the file has nothing to type")
    target = target_chars if target_chars is not None else default_target_chars(pauses)
    lines = text.split("\n")
    starts = _line_starts(text)
    n_lines = len(starts)
    blocks = [i for i in range(n_lines) if lines[i][:1].strip() and (i == 0 or not lines[i - 1].strip())]
    first_allowed = n_lines // 3
    options: list[Region] = []
    for bi, line_no in enumerate(blocks):
        if line_no < first_allowed or line_no == 0:
            continue
        start = starts[line_no]
        end = len(text)
        for next_line in blocks[bi + 1 :]:
            if starts[next_line] - start >= target:
                end = starts[next_line]
                break
        end = _content_end(text, start, end)
        if end > start:
            options.append(Region(start, end))
    if options:
        big_enough = [r for r in options if r.end - r.start >= 0.75 * target]
        pool = big_enough or [max(options, key=lambda r: r.end - r.start)]
        return random.Random(f"sidecar-demo:{seed}:region").choice(pool)
    # Fallback: whole lines from the end of the file, at least `target` characters.
    end = _content_end(text, 0, len(text))
    line_no = n_lines - 1
    while line_no > 0 and end - starts[line_no] < target:
        line_no -= 1
    return Region(starts[line_no], end)


def split_keys(typed: str) -> list[str]:
    """Split ``typed`` into key presses: one character each, except that Enter
    carries the next line's indentation, as an auto-indenting editor inserts it.
    Leading indentation of the very first line is one press (a Tab)."""
    keys: list[str] = []
    i, n = 0, len(typed)
    j = i
    while j < n and typed[j] in _INDENT:
        j += 1
    if j > i:
        keys.append(typed[i:j])
        i = j
    while i < n:
        if typed[i] == "\n":
            j = i + 1
            while j < n and typed[j] in _INDENT:
                j += 1
            keys.append(typed[i:j])
            i = j
        else:
            keys.append(typed[i])
            i += 1
    return keys


def _pause_reason(keys: list[str], k: int) -> str:
    """Why key ``k`` is a good place to stop, or "" if it is not."""
    key = keys[k]
    if key.startswith("\n") or key.isspace():
        return ""
    nxt = keys[k + 1] if k + 1 < len(keys) else "\n"
    if nxt.startswith("\n"):
        return "end of line"
    if key in PAUSE_AFTER:
        prev = keys[k - 1] if k > 0 else ""
        if key == "." and prev.isdigit():
            return ""  # a decimal point, not an attribute access
        if nxt == "=":
            return ""  # the first half of ==, <=, ...
        return f"after '{key}'"
    return ""


def choose_pauses(keys: list[str], pauses: int, seed: int = 0) -> dict[int, str]:
    """Choose up to ``pauses`` key indices to stop after, spread over the text.

    The text is cut into ``pauses`` equal slices; in each, a seeded point is drawn
    and the nearest unused candidate (an end of line or a character from
    ``PAUSE_AFTER``) is taken. Returns ``{key index: reason}``.
    """
    candidates = [(k, r) for k in range(len(keys)) if (r := _pause_reason(keys, k))]
    if pauses <= 0 or not candidates:
        return {}
    ends: list[int] = []
    total = 0
    for key in keys:
        total += len(key)
        ends.append(total)
    rng = random.Random(f"sidecar-demo:{seed}:pauses")
    chosen: dict[int, str] = {}
    for slot in range(min(pauses, len(candidates))):
        point = (slot + rng.uniform(0.15, 0.85)) * total / pauses
        free = [(k, r) for k, r in candidates if k not in chosen]
        k, reason = min(free, key=lambda c: (abs(ends[c[0]] - point), c[0]))
        chosen[k] = reason
    return dict(sorted(chosen.items()))


def plan_typing(
    document: str,
    pauses: int = 8,
    seed: int = 0,
    speed: float = 1.0,
    region: Region | None = None,
    model: TypingModel | None = None,
) -> TypingPlan:
    """Plan how a person types ``region`` of ``document`` back in.

    ``pauses`` is the number of stops for a suggestion, ``speed`` divides every
    duration (1.0 is about 8 keys per second). Deterministic for a given seed.
    """
    region = region or choose_region(document, pauses, seed)
    model = model or TypingModel(seed=seed, speed=speed)
    keys = split_keys(document[region.start : region.end])
    stops = choose_pauses(keys, pauses, seed)
    prefix = document[: region.start]
    line, character = position_at(prefix, len(prefix))
    offset = region.start
    strokes: list[Keystroke] = []
    for k, key in enumerate(keys):
        reason = stops.get(k, "")
        strokes.append(
            Keystroke(
                delay_s=model.interval_s(key),
                offset=offset,
                line=line,
                character=character,
                text=key,
                pause=bool(reason),
                reason=reason,
                look_s=model.look_s() if reason else 0.0,
            )
        )
        offset += len(key)
        if "\n" in key:
            line += key.count("\n")
            character = utf16_len(key.rsplit("\n", 1)[1])
        else:
            character += utf16_len(key)
    return TypingPlan(document=document, region=region, keystrokes=tuple(strokes))
