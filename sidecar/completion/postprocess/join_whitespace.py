"""A text rule, whitespace at the join: no double space where the suggestion meets
the text before the cursor, and no space that nobody wrote.

Rule: when the cursor line has text before the cursor and that text ends with a space or
a tab, the suggestion's leading spaces and tabs are dropped (the user already typed the
separator). On a blank, indented cursor line, leading spaces narrower than one
indentation unit of the document are dropped too: that is the same separator again (a
tokenizer that glues the space to the next word writes `` a += b;`` after ``  ``).
Nothing else is changed: a suggestion that starts without a space after text that ends
without one stays glued (``foo.`` + ``bar``, ``x =`` + ``1`` is the model's choice, not
ours), and whole units of indentation on a blank cursor line are the indentation rule's
business.

Sources of the bugs: after ``return `` a model that answered `` x + 1`` showed
``return  x + 1``; the embedded model answers `` "blue": ...`` on a blank line indented
by 4 (recorded golden cases ``py_dict_literal``, ``js_function_body``, ``sh_loop``).

Examples:
- ``return |`` + `` x + 1`` → ``x + 1``;
- ``print("a", |`` + ``\\tb)`` → ``b)``;
- ``x =|`` + ``1`` → ``1`` (no space invented);
- ``    |`` + `` y = 2`` → ``y = 2`` (4-space file);
- ``    |`` + ``    y = 2`` → unchanged here.
"""

from __future__ import annotations

from ..context import CompletionContext


def join(lines: list[str], ctx: CompletionContext, width: int) -> list[str]:
    """Drop the leading blanks of ``lines[0]`` after a cursor line that ends with one
    (``width``: the document's indentation unit in spaces)."""
    prefix, first = ctx.line_prefix, lines[0]
    if not prefix or prefix[-1] not in " \t" or first[:1] not in (" ", "\t"):
        return lines
    ws = first[: len(first) - len(first.lstrip(" \t"))]
    if prefix.strip() or (first.strip() and "\t" not in ws and len(ws) < width):
        return [first.lstrip(" \t"), *lines[1:]]
    return lines
