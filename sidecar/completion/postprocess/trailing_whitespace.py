"""A text rule, trailing whitespace: no line of a suggestion ends with spaces or
tabs, and the suggestion ends with its last non-blank line.

Rule: every line is right-stripped, then the whole text (trailing blank lines go).

Source: editors show trailing blanks of ghost text as nothing, and accepting them leaves
whitespace that linters flag; a model often ends with ``"   \\n  \\n"``.

Examples:
- ``"[1, 2]   \\n  \\n\\n"`` → ``"[1, 2]"``;
- ``"a = 1  \\nb = 2\\t"`` → ``"a = 1\\nb = 2"``.
"""

from __future__ import annotations


def trim(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip()
