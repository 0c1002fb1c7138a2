"""A text rule, indentation: the answer's lines are indented in the document's style.

Rule: the document's style (tabs, or spaces of some width) is read from the windows
around the cursor (:func:`detect`). Each line of the answer after the first, and the
first when it starts a blank cursor line, whose indentation is not in that style (spaces
in a tab file; tabs in a space file; spaces of another width in a space file) is
re-indented: its depth *relative to the cursor line*, in the model's own unit, becomes
the same number of the document's units added to the cursor line's indentation.
Indentation left over after whole units (alignment) stays spaces.

On a blank cursor line the answer's first line is indented *from the start of the line*,
as every later line is: the embedded model re-writes the cursor line's indentation
(``\\t|`` then ``"\\tnames = ..."``, or ``"    |"`` then ``"\\n    for v in values:"``).
So a first line with its own indentation, or the first line after a leading line break,
goes on the cursor line with only the indentation the cursor line does not have yet. A
line indented less than the cursor stays where it is (it cannot go on the cursor line
without deleting the user's indentation).

The model's unit: a tab is one unit; spaces count in the width of the first step in by
the model after a line that opens a block (ends with ``:``, ``{``, ``=>``, ``->``,
``do``, ``then``; not ``(``, whose hanging indent may be two units), and until then in
the document's width (4 in a tab file). So a line's indentation depends only on the
lines before it, and a line shown while streaming keeps its indentation when more text
arrives.

Nothing is changed when the context shows no indented line, or the answer's lines are in
the document's style already.

Source of the bug: a tab-indented file with a model answering in 4-space indentation got
``\\t    for x in xs:`` and 8-space lines below it.

Examples:
- tab file, cursor line ``\\t|``, answer ``"    for x in xs:\\n        total += x"`` →
  ``"for x in xs:\\n\\t\\ttotal += x"``;
- 4-space file, cursor line ``    |``, answer ``"\\n    for v in values:\\n        t += v"``
  → ``"for v in values:\\n        t += v"``;
- 2-space file, cursor line ``  if x:|``, answer ``"\\n      y()"`` (4-space unit: the
  model's step after the opener is 4) → ``"\\n    y()"``;
- 4-space file, answer ``"\\n\\t\\treturn 1"`` after ``    def f():`` →
  ``"\\n        return 1"``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ..context import CompletionContext
from .common import leading_ws, level

_OPENS = re.compile(r"(?:[:{]|=>|->|\bdo|\bthen)\s*$")


@dataclass(frozen=True)
class Style:
    """``tab``: one tab per level; ``space``: ``width`` spaces per level."""

    kind: str
    width: int

    def unit(self) -> str:
        return "\t" if self.kind == "tab" else " " * self.width


def detect(text: str) -> Style | None:
    """The indentation style of ``text``: tabs when more indented lines start with a tab
    than with spaces; else spaces, as wide as the most common step in between consecutive
    lines (2 to 8; a 1-space lead such as a ``*`` comment line is not indentation). None
    when no line is indented."""
    tabs = spaces = 0
    steps: Counter[int] = Counter()
    prev: int | None = None
    for line in text.split("\n"):
        if not line.strip():
            continue
        ws = leading_ws(line)
        if ws.startswith("\t"):
            tabs += 1
            prev = None
            continue
        n = len(ws)
        if n >= 2 and not line.lstrip().startswith("*"):
            spaces += 1
        if "\t" not in ws and prev is not None and 2 <= n - prev <= 8:
            steps[n - prev] += 1
        prev = n if "\t" not in ws else None
    if tabs == 0 and spaces == 0:
        return None
    if tabs > spaces:
        return Style("tab", 4)
    if steps:
        best = max(steps.values())
        return Style("space", min(k for k, v in steps.items() if v == best))
    return Style("space", 4)


def normalise(lines: list[str], ctx: CompletionContext, style: Style | None) -> list[str]:
    """Re-indent ``lines`` (the answer, split at its breaks; ``lines[0]`` continues the
    cursor line) to ``style``, and place the first line of an answer on a blank cursor
    line (see module doc)."""
    out = list(lines)
    measure = style or Style("space", 4)
    cursor_ws = leading_ws(ctx.line_prefix)
    cursor_level = level(cursor_ws, measure.width)
    base_model, base_level = cursor_ws, cursor_level  # the line the model's first step is from
    if not ctx.line_prefix.strip() and not ctx.mid_line:
        if out[0] == "" and len(out) > 1 and out[1].strip():
            # A leading break on a blank cursor line: the first line goes on the cursor
            # line, unless it is indented less than the cursor (it cannot be, there).
            ws = leading_ws(out[1])
            first = level(ws, measure.width)
            if first >= cursor_level - 1e-9:
                out = [_render(first - cursor_level, measure, measure.width) + out[1][len(ws) :], *out[2:]]
                base_model, base_level = ws, first
        elif out[0].strip() and leading_ws(out[0]):
            # The model indented its first line itself: that indentation counts from the
            # start of the line, not from the cursor.
            ws = leading_ws(out[0])
            first = level(ws, measure.width)
            if first >= cursor_level - 1e-9:
                out[0] = _render(first - cursor_level, measure, measure.width) + out[0][len(ws) :]
                base_model, base_level = ws, first
            else:
                base_model, base_level = cursor_ws + ws, cursor_level + first
    if style is None:
        return out
    unit, learned = style.width, False  # the model's space unit, until it shows its own
    prev_ws, prev_text = base_model, ctx.line_prefix + out[0]
    for i in range(1, len(out)):
        line = out[i]
        if not line.strip():
            continue
        ws = leading_ws(line)
        if not learned and _OPENS.search(prev_text.rstrip()) and _is_spaces(ws) and _is_spaces(prev_ws):
            step = len(ws) - len(prev_ws)
            if 2 <= step <= 8:
                unit, learned = step, True
        if _foreign(ws, style) or (style.kind == "space" and _is_spaces(ws) and unit != style.width):
            delta = level(ws, unit) - level(base_model, unit)
            out[i] = _render(base_level + delta, style, unit) + line[len(ws) :]
        prev_ws, prev_text = ws, line
    return out


def _is_spaces(ws: str) -> bool:
    return "\t" not in ws


def _foreign(ws: str, style: Style) -> bool:
    """Indentation that is not in ``style`` at all: a run of 2 or more spaces in a tab
    file (before its tabs or after them: ``\t    x``), a tab in a space file."""
    if style.kind == "tab":
        return "  " in ws
    return "\t" in ws


def _render(level: float, style: Style, unit: int) -> str:
    level = max(0.0, level)
    whole = int(level + 1e-9)
    rest = round((level - whole) * (style.width if style.kind == "space" else unit))
    return style.unit() * whole + " " * rest
