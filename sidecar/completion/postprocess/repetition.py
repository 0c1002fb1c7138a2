"""A stop rule, repetition: the answer ends before a second copy of one of its own
lines.

Rule: a complete line of the answer that is a copy of an earlier line of the same answer
ends the answer; the copy and everything after it are dropped, and the stream is told to
stop, so the upstream request is closed at the first copy. Lines are compared without
indentation and trailing whitespace; the answer's first line is compared as the whole
cursor line (``line_prefix`` + the text), so ``x = x + |`` answered with ``1`` and then
``x = x + 1`` lines stops at once.

Code repeats some lines by nature, so a copy of an earlier, non-adjacent line only counts
when that line is not *structural*: brackets and punctuation only (``}``, ``});``), a line
that starts with a closing bracket (``} else {``), or one that starts with a keyword that
ends or separates a branch (``return``, ``break``, ``continue``, ``pass``, ``raise``,
``throw``, ``else``, ``end``, ...). ``if a:\\n    return 1\\nif b:\\n    return 1`` keeps
both returns. A line that is an exact copy of the line right before it (same
indentation) always counts: that is how a model stuck in a loop looks.

While the stream runs, the last, still incomplete line is held back (not shown) while it
is the start of a line it would be a copy of, so a suggestion never shows a partial copy
that the next piece of text removes (:func:`holds`).

Source of the bug: a model that repeated ``x = x + 1`` until ``max_tokens`` got all 14
copies into the updates and into the re-ask; only a repeat of the suffix's first line
stopped a stream.

Examples:
- ``x = x + 1\\nx = x + 1\\nx = x + 1`` → ``x = x + 1``;
- ``a = f()\\nb = g(a)\\na = f()\\n`` → ``a = f()\\nb = g(a)``;
- ``if a:\\n    return 1\\nif b:\\n    return 1`` → unchanged (``return 1`` is structural).
"""

from __future__ import annotations

import re

from .common import MIN_REPEAT_CHARS, core

_STRUCTURAL = re.compile(
    r"(return|break|continue|pass|raise|throw|else|elif|elsif|end|fi|done|esac|try|finally|"
    r"except|catch|default)\b"
)


def structural(line: str) -> bool:
    """True for a line that code repeats by nature (see module doc)."""
    s = line.strip()
    return len(core(s)) < MIN_REPEAT_CHARS or s[0] in ")]}" or bool(_STRUCTURAL.match(s))


def repeats(line: str, earlier: list[str]) -> bool:
    """Whether complete ``line`` is a copy of one of ``earlier`` (the answer's previous
    lines, the first one as the whole cursor line; blank lines included)."""
    s = line.strip()
    if not s:
        return False
    if earlier and line.rstrip() == earlier[-1].rstrip():
        return True
    if structural(s):
        return False
    return any(s == e.strip() for e in earlier)


def holds(line: str, earlier: list[str]) -> bool:
    """Whether the incomplete last ``line`` may still become a copy (see module doc)."""
    s = line.strip()
    if not s:
        return False
    if earlier and earlier[-1].rstrip().startswith(line.rstrip()):
        return True
    return any(e.strip().startswith(s) for e in earlier if e.strip() and not structural(e))
