"""A stop rule, markdown fences: the answer ends before a line that opens or closes a
markdown code block.

Rule: a line that starts with three backticks ends the answer (it and what follows are
dropped; the stream stops). While streaming, a last line that is still the start of a
fence (one or two backticks) is held back. Not applied in markdown documents, or when the
text before the cursor has a fence of its own (code in a docstring or a notebook cell).

Source: the embedded SmolLM2 is an instruct model; it ends most answers with ``\\n```\\n``
and a paragraph of prose (8 of the 18 recorded golden cases).

Examples:
- ``"\\n    return result\\n```\\n\\nThis implementation..."`` → ``"\\n    return result"``;
- in ``README.md``, ``"```python"`` is kept.
"""

from __future__ import annotations

from ..context import CompletionContext

FENCE = "```"
_MARKDOWN = {"markdown", "mdx", "rmarkdown", "quarto"}


def applies(ctx: CompletionContext) -> bool:
    return ctx.language.lower() not in _MARKDOWN and FENCE not in ctx.prefix


def is_fence(line: str) -> bool:
    return line.lstrip().startswith(FENCE)


def holds(line: str) -> bool:
    s = line.strip()
    return bool(s) and (FENCE.startswith(s) or s.startswith(FENCE))
