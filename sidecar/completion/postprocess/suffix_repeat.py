"""A stop rule, lines after the cursor: the answer ends before a line that is already
there.

Rule: a complete line of the answer that equals one of the first ``SUFFIX_LINES`` (3)
non-blank lines after the cursor line ends the answer; it and everything after it are
dropped, and the stream is told to stop. Equal means equal without indentation, or equal
*up to trailing punctuation and brackets* (:func:`common.core`): a model that writes
``foo(a, b)):`` above an existing ``foo(a, b)`` is rewriting that line. A shorter start
of a suffix line that ends where a word ends is a copy too: ``return total`` above
``return total / len(values)`` (the model began that line again and stopped). A suffix line
with a core shorter than 3 characters (``}``, ``});``) matches only the very same line,
indentation included: ``\\t}`` above the ``\\t}`` that closes the block the cursor is in
is that closer written twice, while a ``}`` at another depth closes something else. The
answer's first line is compared only when it is a whole line (the cursor line is blank
before the cursor); the rest of a started line is not a copy of anything. With text
after the cursor, the rest of the cursor line is the first line compared (the model
writing it again on a new line).

Streaming: the last, still incomplete line is held back while it is the start of one of
those suffix lines, or already equal to one up to punctuation (:func:`holds`). So the
text shown while streaming never has a partial line that the final text removes as a
copy: whatever the shown line becomes is either still held or no longer a copy.

Sources of the bugs: the stream only stopped at an exact repeat of the first suffix line,
so ``foo(a, b)):`` got through; twice a first answer showed part of a duplicated next
line (``foo(a,``) that the final text then removed; and the embedded model closes the
block it was asked to fill (``\\n\\t\\ttotal += x\\n\\t}`` before an existing ``\\t}``).

Examples, with ``foo(a, b)`` the line after the cursor:
- ``x = 1\\n    foo(a, b)):`` → ``x = 1``;
- ``x = 1\\n    foo(a, b)`` → ``x = 1``;
- while streaming, ``x = 1\\n    foo(a,`` shows ``x = 1``;
- ``x = 1\\n    foo(a, b) + 1`` → unchanged;
- ``x = 1\\n    foo`` → ``x = 1`` (a start of the line, to a word end).
"""

from __future__ import annotations

from .common import MIN_REPEAT_CHARS, SuffixLine, core


def repeats(line: str, following: tuple[SuffixLine, ...]) -> bool:
    """Whether complete ``line`` is a copy of one of ``following``
    (:func:`common.following_lines`)."""
    s = line.strip()
    if not s:
        return False
    c = core(s)
    for f in following:
        if f.short:
            if line.rstrip() == f.full:
                return True
        elif s == f.text or (len(c) >= MIN_REPEAT_CHARS and (c == f.core or _starts(f.text, s))):
            return True
    return False


def _starts(text: str, start: str) -> bool:
    """``text`` is ``start`` or starts with it, and a word ends where ``start`` ends."""
    if not text.startswith(start):
        return False
    rest = text[len(start) :]
    return not rest or not (rest[0].isalnum() or rest[0] == "_")


def holds(line: str, following: tuple[SuffixLine, ...]) -> bool:
    """Whether the incomplete last ``line`` may still become a copy of a suffix line (or
    already is one)."""
    s = line.strip()
    if not s:
        return False
    for f in following:
        if f.full.startswith(line.rstrip()) if f.short else f.text.startswith(s):
            return True
    return repeats(line, following)
