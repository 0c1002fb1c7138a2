"""Streaming postprocessing: decide when a growing completion is finished, and clean it.

Rules (applied as text arrives, so the upstream stream can be closed early):
- stop before a line that repeats the first non-blank line of the suffix (the model is
  re-writing code that already follows the cursor);
- keep one line unless the context allows several (``CompletionContext.multiline``); at
  the end of a line, a completion that starts with a line break keeps the next line
  (the next-line suggestion that shows after a finished statement);
- trim trailing whitespace;
- never return text that already follows the cursor: drop an ending that overlaps the
  start of the cursor line's suffix, and return nothing when the suffix already starts
  with the whole completion.
"""

from __future__ import annotations

from .context import CompletionContext

_MIN_REPEAT_CHARS = 3  # a suffix line shorter than this (")", "}") is too common to match


class StreamFilter:
    """Feed text deltas with :meth:`feed`; read the cleaned result with :meth:`text`."""

    def __init__(self, ctx: CompletionContext) -> None:
        self.ctx = ctx
        self._raw = ""
        self._cut: int | None = None  # index in _raw where the completion ends
        self._checked_lines = 0
        self._suffix_line = _first_suffix_line(ctx)

    @property
    def done(self) -> bool:
        return self._cut is not None

    @property
    def raw(self) -> str:
        return self._raw

    def feed(self, delta: str) -> bool:
        """Append ``delta``; return True once the completion is finished (stop the stream)."""
        if self._cut is not None:
            return True
        self._raw += delta
        lines = self._raw.split("\n")
        # Only complete lines (all but the last) are judged.
        pos = sum(len(line) + 1 for line in lines[: self._checked_lines])
        for i in range(self._checked_lines, len(lines) - 1):
            line = lines[i]
            if i > 0 and self._suffix_line and line.strip() == self._suffix_line:
                self._cut = max(0, pos - 1)  # drop the line and the break before it
                return True
            if not self.ctx.multiline and (i == 1 or (i == 0 and (line.strip() or self.ctx.mid_line))):
                self._cut = pos + len(line)
                return True
            pos += len(line) + 1
            self._checked_lines = i + 1
        return False

    def raw_kept(self) -> str:
        """The raw model text up to where the completion ends (no cleaning)."""
        return self._raw if self._cut is None else self._raw[: self._cut]

    def text(self) -> str:
        """The cleaned completion (may be empty)."""
        return clean(self.raw_kept(), self.ctx)


def clean(text: str, ctx: CompletionContext) -> str:
    """Apply the line policy, the suffix-repeat cut, whitespace trimming and the
    suffix-overlap rule to ``text``, a completion at ``ctx``."""
    if not ctx.multiline:
        text = _one_line(text, ctx)
    first = _first_suffix_line(ctx)
    if first and "\n" in text:
        kept = []
        for i, line in enumerate(text.split("\n")):
            if i > 0 and line.strip() == first:
                break
            kept.append(line)
        text = "\n".join(kept)
    text = "\n".join(line.rstrip() for line in text.split("\n")).rstrip()
    return strip_suffix_overlap(text, ctx.line_suffix)


def _one_line(text: str, ctx: CompletionContext) -> str:
    """The first line; at the end of a line, a leading line break and the line after it."""
    first, _, rest = text.partition("\n")
    if first.strip() or ctx.mid_line or not rest:
        return first
    return first + "\n" + rest.split("\n", 1)[0]


def _first_suffix_line(ctx: CompletionContext) -> str:
    """The first non-blank line after the cursor (the rest of the cursor line when text
    follows the cursor), stripped; empty when shorter than ``_MIN_REPEAT_CHARS``."""
    lines = [ctx.line_suffix] if ctx.mid_line else ctx.suffix.split("\n")[1:]
    for line in lines:
        if line.strip():
            first = line.strip()
            return first if len(first) >= _MIN_REPEAT_CHARS else ""
    return ""


def strip_suffix_overlap(text: str, line_suffix: str) -> str:
    """Remove the part of ``text`` that the cursor line already has after the cursor.

    If ``line_suffix`` starts with all of ``text``, the result is ``""``. Otherwise the
    longest ending of ``text``'s last line that equals a start of ``line_suffix`` is
    dropped (punctuation of any length, word characters from 4 characters up).
    """
    if not text:
        return ""
    tail = line_suffix.rstrip()
    if not tail:
        return text
    if tail.startswith(text):
        return ""
    last = text.rsplit("\n", 1)[-1]
    for k in range(min(len(last), len(tail)), 0, -1):
        overlap = tail[:k]
        # Closing brackets, quotes and punctuation overlap by design; a short overlap of
        # word characters ("1" before "1)") is more likely chance, so it needs 4+ chars.
        if last.endswith(overlap) and (k >= 4 or not any(c.isalnum() for c in overlap)):
            return text[: len(text) - k].rstrip() if "\n" in text[: len(text) - k] else text[: len(text) - k]
    return text
