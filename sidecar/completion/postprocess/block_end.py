"""A stop rule, end of the block: a multi-line answer ends before a line that is
indented less than the cursor line.

Rule: the cursor line's indentation is the block the user is writing in. A line of the
answer with text that is indented less (in units of the document's style: a tab, or its
width of spaces) has left that block, and the answer ends before it. The first line with
text of an answer is exempt at the end of a non-blank line (``        return n|`` may
well be followed by a dedented ``    return fib(n - 1)``), but not on a blank cursor line:
there the user has placed the cursor at the depth they want to write at.

While streaming, a last line whose text has started at a smaller depth is held back.

Source: the embedded model, asked for the body of a loop on an indented blank line,
answers with a column-0 comment block (``\\n\\n# Output: \\n# 1\\n# 2...``), and inside
a function it writes the function's closing ``}`` and the next function.

Examples (4-space file):
- ``    |`` + ``"\\n\\n# Output:\\n# 1"`` → ``""``;
- ``    if x:|`` + ``"\\n        y = 1\\nprint(y)"`` → ``"\\n        y = 1"``;
- ``        return n|`` + ``"\\n    return 0"`` → unchanged (the first line is exempt).
"""

from __future__ import annotations

from ..context import CompletionContext
from .common import leading_ws, level


def below(line: str, ctx: CompletionContext, width: int) -> bool:
    """Whether ``line`` (with text) is indented less than the cursor line."""
    return level(leading_ws(line), width) < level(leading_ws(ctx.line_prefix), width) - 1e-9


def exempt(text_seen: bool, ctx: CompletionContext) -> bool:
    """The first line with text after a non-blank cursor line is not judged."""
    return not text_seen and bool(ctx.line_prefix.strip())
