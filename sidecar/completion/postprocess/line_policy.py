"""The line policy, judged before the stop rules: how many lines a suggestion has,
and where it starts.

Rule:
- text after the cursor on its line (``CompletionContext.mid_line``): the first line only,
  even a blank one (the suggestion cannot move to another line in the middle of one);
- one line unless ``multiline`` (``CompletionContext.multiline``: a blank cursor line, or
  the end of a line that opens a block); the first non-blank line is that line, so at the
  end of a line a completion that starts with a line break keeps the next line (the
  next-line suggestion after a finished statement);
- several lines (``multiline``): up to the first blank line after some text;
- leading blank lines are skipped: the suggestion keeps one line break before its first
  non-blank line (:func:`collapse_leading_blank`). After ``MAX_LEADING_BLANK`` blank lines
  with no text (the two of a Python top-level gap and one more) the model is not going to
  write anything useful, and the stream stops.

Source of the bug fixed here: a model that began with a blank line at the end of a line
got an empty answer. The stop sequence ``"\\n\\n"`` ended its stream before the first
character, and the filter kept only "a leading break and the next line", so
``"\\n\\ndef main():"`` after ``import os`` showed nothing. ``prompts.stop_sequences`` no
longer sends ``"\\n\\n"`` at the end of a non-blank line; this rule ends the stream at the
first blank line *after* some text instead.

Examples (``|`` is the cursor):
- ``x = compute(|`` + ``a)\\nmore()`` → ``a)`` (one line);
- ``x = 1|`` + ``\\n\\nprint(x)\\n`` → ``\\nprint(x)``;
- ``def f():|`` + ``\\n    a = 1\\n    return a\\n\\nprint(f())`` → ``\\n    a = 1\\n    return a``;
- ``foo(|)`` + ``\\nbar`` → ``""`` (mid-line, the first line is empty).
"""

from __future__ import annotations

from .common import is_blank

#: Blank lines with no text before them after which the stream is given up.
MAX_LEADING_BLANK = 3

# Verdicts of :func:`judge`.
END_BEFORE = "before"  # the answer ends before this line (it is dropped)
END_AFTER = "after"  # the answer ends with this line


def judge(i: int, line: str, text_seen: bool, *, multiline: bool, mid_line: bool) -> str | None:
    """The line policy's verdict on complete line ``i`` of a completion (``line``, without
    its break), given whether an earlier line had text: :data:`END_BEFORE`,
    :data:`END_AFTER` or None (go on)."""
    if not multiline and mid_line and i == 0:
        return END_AFTER
    if is_blank(line):
        if text_seen:
            return END_BEFORE  # a blank line after text ends a multi-line suggestion
        if i > MAX_LEADING_BLANK:  # line 0 is the rest of the cursor line, not a blank line
            return END_BEFORE
        return None
    return None if multiline else END_AFTER


def collapse_leading_blank(lines: list[str]) -> list[str]:
    """Keep one line break before the first non-blank line: ``["", "  ", "x"]`` →
    ``["", "x"]``; a first line with text is left alone; no text at all gives ``[""]``."""
    for k, line in enumerate(lines):
        if not is_blank(line):
            return lines if k == 0 else ["", *lines[k:]]
    return [""]
