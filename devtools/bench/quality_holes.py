"""Seeded holes for the quality benchmark (``python -m devtools.bench quality``).

A *hole* is a place in a real source file where part of the text is removed; the
benchmark opens the remaining text as a document, asks for a completion at the cursor and
compares the answer with what was removed. Lines are split at ``\\n`` only (a ``\\r``
before it stays with the line and is stripped from the truth); columns are code points.

Which lines qualify
    A *code line* is a line with at least ``MIN_CODE_CHARS`` (4) non-blank characters
    that holds no comment marker of its language (``#`` for Python, shell, Ruby, YAML,
    TOML; ``//``, ``/*``, or a leading ``*`` for the C family, JS/TS, Go, Rust, Java...;
    a line with a marker anywhere, even inside a string, is left out) and does not start
    a docstring (``\"\"\"`` or ``'''``). Holes are only made at line index
    ``MIN_LINE_INDEX`` (3, 0-based) or later, so that there is a prefix to complete from.

The four kinds (``KINDS``), with the text that is removed (the *middle*) and the cursor:

``mid_word``
    The cursor is inside an identifier (``[A-Za-z_][A-Za-z0-9_]*``) of at least 4
    characters of a code line, with at least 2 of its characters before the cursor and
    at least 1 after. The middle is the rest of the line from the cursor (trailing
    whitespace dropped): the document's cursor line ends at the cursor, and the next
    line follows. Example: ``close(in->fd);`` with the cursor after ``clo`` has the
    middle ``se(in->fd);``.
``mid_line``
    The cursor is at a token boundary inside a code line that ends in a *closer run*:
    the longest ending made of ``)]};,:`` characters (``);`` of ``foo(a, b);``, ``):``
    of ``def f(x):``), which must not be the whole line. The cursor is right after
    ``(``, ``[`` or ``{``, or after the space that follows ``,``, ``=`` or ``:``; the
    character at the cursor is not blank and not in the closer run. The middle is the
    text from the cursor to the closer run (it must hold at least 2 non-blank
    characters); the closer run stays after the cursor on the same line, as an editor
    that auto-closes brackets leaves it. Example: ``x = compute(a, b)`` with the cursor
    after ``compute(`` has the middle ``a, b`` and the line suffix ``)``.
``end_of_line``
    The cursor is at the end of a code line (after its last non-blank character) whose
    next line is a code line too. That next line is removed; the middle is a line break
    followed by it (indentation included, trailing whitespace dropped).
``blank_line``
    A code line inside a block (indented, with a non-blank line before it) is emptied
    down to its indentation; the cursor is at the end of the indentation, as after
    pressing Enter in an editor that indents. The middle is the line's text after the
    indentation.

The *truth* of a hole is the first line of its middle: for ``end_of_line`` the line
after the leading break. ``Hole.truth_line`` holds it stripped of surrounding whitespace
(for the exact-first-line metric); ``Hole.middle`` is the exact text a perfect
suggestion inserts (for accepted characters).

Selection (:func:`make_holes`): for each kind, each file's candidates are shuffled by
``random.Random(f"{seed}:{kind}:{file name}")`` and taken round-robin over the files (in
the order given) until ``per_kind`` holes are made or the candidates run out; at most one
hole per line and kind. The same seed, files and ``per_kind`` give the same holes.
"""

from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

KINDS = ("mid_word", "mid_line", "end_of_line", "blank_line")
MIN_CODE_CHARS = 4
MIN_LINE_INDEX = 3
CLOSERS = ")]};,:"

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HASH_COMMENT = {"python", "shellscript", "ruby", "yaml", "toml"}


@dataclass(frozen=True)
class Hole:
    """One hole. ``line``/``column`` are the cursor's 0-based line and code-point column
    in ``document``; ``character`` is the same column in UTF-16 code units (the LSP
    position); ``offset`` is the cursor's code-point index in ``document``."""

    id: str
    kind: str
    file: str
    language: str
    line: int
    column: int
    character: int
    offset: int
    document: str
    middle: str  # the removed text, exactly as a perfect suggestion inserts it
    truth_line: str  # the first line of ``middle`` (after a leading break), stripped

    @property
    def prefix(self) -> str:
        """The document text before the cursor."""
        return self.document[: self.offset]

    @property
    def suffix(self) -> str:
        """The document text after the cursor."""
        return self.document[self.offset :]

    def describe(self) -> dict[str, Any]:
        """The hole without its document text (for the JSON report)."""
        d = asdict(self)
        del d["document"]
        return d


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units."""
    return sum(2 if ord(c) > 0xFFFF else 1 for c in text)


def is_code_line(line: str, language: str) -> bool:
    """See the module doc: enough non-blank text, no comment marker, no docstring start."""
    stripped = line.strip()
    if len(stripped.replace(" ", "").replace("\t", "")) < MIN_CODE_CHARS:
        return False
    if stripped.startswith(('"""', "'''")):
        return False
    if language in _HASH_COMMENT:
        return "#" not in line
    return "//" not in line and "/*" not in line and not stripped.startswith("*")


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def closer_run(line: str) -> str:
    """The longest ending of ``line`` (trailing whitespace ignored) made of ``CLOSERS``."""
    body = line.rstrip()
    i = len(body)
    while i > 0 and body[i - 1] in CLOSERS:
        i -= 1
    return body[i:]


# -- candidates of each kind: (line index, column) ------------------------------------


def mid_word_columns(line: str) -> list[int]:
    """Cursor columns inside identifiers of 4+ characters, 2+ before and 1+ after."""
    cols = []
    for m in _IDENT.finditer(line):
        if m.end() - m.start() >= 4:
            cols.extend(range(m.start() + 2, m.end()))
    return cols


def mid_line_columns(line: str) -> list[int]:
    """Token-boundary cursor columns before the line's closer run (see module doc)."""
    body = line.rstrip()
    run = closer_run(body)
    if not run or len(run) == len(body.strip()):
        return []
    end = len(body) - len(run)
    start = len(_indent(body))
    cols = []
    for c in range(start + 1, end):
        before, at = body[c - 1], body[c]
        boundary = before in "([{" or (before == " " and c >= 2 and body[c - 2] in ",=:")
        if not boundary or at.isspace() or at in CLOSERS:
            continue
        middle = body[c:end]
        if len(middle.strip()) >= 2 and not middle[-1].isspace():
            cols.append(c)
    return cols


def _candidates(kind: str, lines: list[str], language: str) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    code = [is_code_line(ln, language) for ln in lines]
    for i in range(MIN_LINE_INDEX, len(lines)):
        line = lines[i].rstrip()
        if kind == "mid_word" and code[i]:
            out.extend((i, c) for c in mid_word_columns(line))
        elif kind == "mid_line" and code[i]:
            out.extend((i, c) for c in mid_line_columns(line))
        elif kind == "end_of_line" and code[i] and i + 1 < len(lines) and code[i + 1]:
            out.append((i, len(line)))
        elif kind == "blank_line" and code[i] and _indent(line) and lines[i - 1].strip():
            out.append((i, len(_indent(line))))
    return out


def make_hole(kind: str, path: str, text: str, language: str, line: int, column: int) -> Hole:
    """The hole of ``kind`` at ``line``/``column`` of ``text`` (a candidate position; see
    the module doc for what is removed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown hole kind {kind!r}; choose from {', '.join(KINDS)}")
    lines = text.split("\n")
    cur = lines[line].rstrip("\r")
    body = cur.rstrip()
    if kind == "mid_word":
        middle = body[column:]
        new_lines = lines[:line] + [cur[:column]] + lines[line + 1 :]
    elif kind == "mid_line":
        run = closer_run(body)
        middle = body[column : len(body) - len(run)]
        new_lines = lines[:line] + [cur[:column] + cur[len(body) - len(run) :]] + lines[line + 1 :]
    elif kind == "end_of_line":
        nxt = lines[line + 1].rstrip("\r").rstrip()
        middle = "\n" + nxt
        new_lines = lines[:line] + [cur[: len(body)]] + lines[line + 2 :]
    else:  # blank_line
        ind = _indent(body)
        middle = body[len(ind) :]
        new_lines = lines[:line] + [ind] + lines[line + 1 :]
    document = "\n".join(new_lines)
    offset = sum(len(ln) + 1 for ln in new_lines[:line]) + column
    first = middle[1:] if middle.startswith("\n") else middle
    name = Path(path).name
    return Hole(
        id=f"{kind}:{name}:{line + 1}:{column}",
        kind=kind,
        file=str(path),
        language=language,
        line=line,
        column=column,
        character=utf16_len(new_lines[line][:column]),
        offset=offset,
        document=document,
        middle=middle,
        truth_line=first.split("\n", 1)[0].strip(),
    )


def make_holes(
    files: list[tuple[str, str, str]], per_kind: int, seed: int, kinds: tuple[str, ...] | list[str] = KINDS
) -> list[Hole]:
    """Up to ``per_kind`` holes of each kind from ``files``, a list of (path, text,
    LSP language id), in the deterministic order of the module doc (kind by kind)."""
    holes: list[Hole] = []
    for kind in kinds:
        queues = []
        for path, text, language in files:
            cands = _candidates(kind, text.split("\n"), language)
            random.Random(f"{seed}:{kind}:{Path(path).name}").shuffle(cands)
            queues.append((path, text, language, cands, set()))
        made = 0
        while made < per_kind and any(q[3] for q in queues):
            for path, text, language, cands, used in queues:
                if made >= per_kind:
                    break
                while cands:
                    line, col = cands.pop()
                    if line in used:
                        continue
                    used.add(line)
                    holes.append(make_hole(kind, path, text, language, line, col))
                    made += 1
                    break
    return holes
