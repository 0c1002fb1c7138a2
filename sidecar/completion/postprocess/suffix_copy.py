"""A stop rule, the first line is a copy of a line further down: the suggestion is
not shown.

A small code model often fills a hole with a line it can see a few lines below the cursor
(in a constructor, the attribute assignment that comes three lines later). That line is
already in the document, so as a suggestion it is wrong, and it stays shown while the
user's typing agrees with its start. Rule :mod:`.suffix_repeat` ends an answer at a copy
of one of the next three lines; this rule looks further, at the *first* line with text
only, and drops the whole answer when that line is a copy.

Rule: the first line of the answer with text, taken as the whole line it makes (for the
first line: the cursor line's text before the cursor, the answer's text and, on a line
with text after the cursor, that text; a later line as it is), is compared with the
non-blank lines after the cursor line, up to ``COPY_LINES`` (12) of them, that still lie
in the cursor's block and do not also stand before the cursor (a line the file writes
more than once, ``@Override`` or ``if err != nil {``, is an idiom, not a copy): the lines
are scanned downwards and the scan stops at the first line indented less than the cursor
line (the block closed). The answer ends before that
line (nothing is shown when it is the first line) when the two lines are equal without
indentation and trailing whitespace, and the line has at least ``MIN_COPY_CHARS`` (6)
non-blank characters besides brackets and punctuation (``break;``, ``}``, ``return;``
are written many times in one block for good reasons).

Streaming: the growing first line is held back while the whole line it makes is the
start of one of those lines and already has ``MIN_COPY_CHARS`` characters of core; a
shorter start (``se``, ``self.``) is shown, so short suggestions are not delayed.

Measured on the corpus's tuning half (docs/benchmarks.md, "The suffix-copy filter"): the
line the user actually wrote is such a copy at 0 to 2% of holes of each kind, and without
the "not also above" condition the rule removed an exact ``@Override``.
"""

from __future__ import annotations

from ..context import CompletionContext
from .common import core, leading_ws, level

#: How many non-blank lines below the cursor line (within its block) are compared.
COPY_LINES = 12
#: The least number of characters a line's core (:func:`common.core`) needs to count.
MIN_COPY_CHARS = 6


def block_lines(ctx: CompletionContext, width: int) -> tuple[str, ...]:
    """The stripped non-blank lines after the cursor line that lie in the cursor's block
    (see the module doc), at most ``COPY_LINES``, less those that also stand before the
    cursor (in the prefix window): a line written more than once is an idiom of the file
    (``@Override``, ``if err != nil {``), not a copy."""
    above = {line.strip() for line in ctx.prefix.split("\n")[:-1]}
    cursor_line = ctx.line_prefix + ctx.line_suffix
    depth = level(leading_ws(cursor_line), width) if cursor_line.strip() else level(ctx.line_prefix, width)
    out: list[str] = []
    for line in ctx.suffix.split("\n")[1:]:
        if not line.strip():
            continue
        if level(leading_ws(line), width) < depth:
            break
        if line.strip() not in above:
            out.append(line.strip())
        if len(out) >= COPY_LINES:
            break
    return tuple(out)


def whole_line(index: int, line: str, ctx: CompletionContext) -> str:
    """The document line that answer line ``line`` (number ``index``, 0 the first) makes,
    stripped."""
    if index == 0:
        return (ctx.line_prefix + line + ctx.line_suffix).strip()
    return line.strip()


def copies(full: str, below: tuple[str, ...]) -> bool:
    """Whether the stripped whole line ``full`` is one of ``below`` and long enough to
    count (module doc)."""
    return len(core(full)) >= MIN_COPY_CHARS and full in below


def holds(full: str, below: tuple[str, ...]) -> bool:
    """Whether the growing whole line ``full`` may still become a copy (module doc)."""
    if len(core(full)) < MIN_COPY_CHARS:
        return False
    return any(b.startswith(full) for b in below)
