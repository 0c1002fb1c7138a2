"""Helpers the postprocessing rules share: line cores, indentation levels and the lines
after the cursor.

Nothing here is a rule of its own; see the package docstring for the rules and their order.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..context import CompletionContext

#: A line whose core (see :func:`core`) is shorter than this (``}``, ``});``) is too
#: common to count as a copy of another line unless it is the very same line, indentation
#: included.
MIN_REPEAT_CHARS = 3

#: How many non-blank lines after the cursor line a completion line is compared with.
SUFFIX_LINES = 3

# Characters that may trail a copied line without making it a different line: closing and
# opening brackets, statement and clause punctuation, and whitespace.
_TRAILING = " \t)]}([{;:,."


def core(line: str) -> str:
    """``line`` without its indentation and without trailing punctuation and brackets:
    ``"    foo(a, b)):"`` and ``"foo(a, b)"`` both have the core ``"foo(a, b"``."""
    return line.strip().rstrip(_TRAILING)


def is_blank(line: str) -> bool:
    return not line.strip()


def leading_ws(line: str) -> str:
    """The run of spaces and tabs that starts ``line``."""
    return line[: len(line) - len(line.lstrip(" \t"))]


def level(ws: str, width: int) -> float:
    """Depth of indentation ``ws`` in units: a tab is one, ``width`` spaces are one."""
    return ws.count("\t") + ws.count(" ") / width


@dataclass(frozen=True)
class SuffixLine:
    """A non-blank line after the cursor: ``full`` (indentation kept, right-stripped),
    ``text`` (stripped) and its :func:`core`."""

    full: str
    text: str
    core: str

    @property
    def short(self) -> bool:
        return len(self.core) < MIN_REPEAT_CHARS


def following_lines(ctx: CompletionContext, n: int = SUFFIX_LINES) -> tuple[SuffixLine, ...]:
    """The first ``n`` non-blank lines after the cursor line; when text follows the cursor,
    the rest of the cursor line comes first."""
    lines = ([ctx.line_suffix] if ctx.mid_line else []) + ctx.suffix.split("\n")[1:]
    out: list[SuffixLine] = []
    for line in lines:
        if line.strip():
            out.append(SuffixLine(line.rstrip(), line.strip(), core(line)))
            if len(out) >= n:
                break
    return tuple(out)
