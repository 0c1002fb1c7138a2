"""Definitions in other open documents, and the identifiers used near the cursor.

**Definitions** are found by a regular expression over a document's text (``def name``,
``function name``, ``class Name``, ``fn``/``func``/``struct``/``interface``/``type``,
top-level ``const``/``let``/``var``, and ``type name(...)`` definitions in C-family
languages): ``_index`` maps each name to the 0-based line of its first definition, and
``_definition_span`` gives the definition line and its indented body, at most
``MAX_DEFINITION_LINES`` lines.

**Identifiers near the cursor** (:func:`identifiers_near`): 3+ characters, not keywords,
in the last ``NEAR_BEFORE_CHARS`` characters before the cursor and the first
``NEAR_AFTER_CHARS`` after it, the closest to the cursor first; their definitions are
the second kind of snippet ``select.py`` offers. See docs/architecture.md ("What the
model sees").
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

MAX_DEFINITION_LINES = 12
NEAR_BEFORE_CHARS = 600  # text before the cursor searched for identifiers
NEAR_AFTER_CHARS = 200

_DEF = re.compile(
    r"^[ \t]*(?:(?:export|default|public|private|protected|internal|static|async|abstract|final|"
    r"sealed|open|override|inline|pub(?:\([\w:]+\))?|unsafe|extern|data|case)[ \t]+)*"
    r"(?:def|function\*?|class|fn|func|struct|enum|trait|interface|type|module|object|record|union|"
    r"protocol|impl|fun|sub|macro_rules!)[ \t]+(?:\([^)\n]*\)[ \t]*)?(?P<name>[A-Za-z_$][\w$]*)",
    re.M,
)
_TOP_BINDING = re.compile(r"^(?:export[ \t]+)?(?:const|let|var)[ \t]+(?P<name>[A-Za-z_$][\w$]*)[ \t]*[:=]", re.M)
_C_DEF = re.compile(
    r"^[ \t]*(?!(?:return|if|while|for|switch|else|case|do|sizeof|new|delete|throw|goto|using)\b)"
    r"(?:[A-Za-z_][\w:<>,\[\]]*[ \t*&]+){1,6}(?P<name>[A-Za-z_]\w*)[ \t]*\([^;\n]*$",
    re.M,
)
_C_FAMILY = frozenset(
    {
        "c",
        "cpp",
        "c++",
        "objective-c",
        "objective-cpp",
        "java",
        "csharp",
        "cs",
        "cuda",
        "cuda-cpp",
        "kotlin",
        "scala",
        "dart",
        "swift",
        "php",
    }
)
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")
_KEYWORDS = frozenset(
    """
and as assert async await break case catch class const continue def default del delete do elif else enum except
export extends false final finally fn for from func function go if impl import in instanceof interface is lambda let
loop match mod mut new nil none not null or package pass private protected pub public raise return self static struct
super switch this throw true try type typeof use var void while with yield int str float bool char string long short
unsigned signed double auto None True False print len range list dict set tuple object err error ctx
""".split()
)


@dataclass
class _Indexed:
    stamp: int  # hash of the text it was built from
    lines: list[str]
    defs: dict[str, int]  # name -> 0-based line of its first definition


def _index(text: str, language: str) -> tuple[list[str], dict[str, int]]:
    lines = re.split(r"\r\n|\r|\n", text)
    starts = [0]
    for m in re.finditer(r"\r\n|\r|\n", text):
        starts.append(m.end())
    defs: dict[str, int] = {}
    patterns = [_DEF, _TOP_BINDING] + ([_C_DEF] if language.lower() in _C_FAMILY else [])
    for pat in patterns:
        for m in pat.finditer(text):
            name = m.group("name")
            line = bisect_right(starts, m.start("name")) - 1
            if name not in defs or line < defs[name]:
                defs[name] = line
    return lines, defs


def _definition_span(lines: list[str], line: int) -> tuple[int, int]:
    """[start, end) lines of the definition at ``line``: its line and the lines after it
    that are blank or indented deeper, plus a closing line at its own indent
    (``}``, ``end``), at most ``MAX_DEFINITION_LINES``."""
    head = lines[line]
    indent = len(head) - len(head.lstrip())
    end = line + 1
    limit = min(len(lines), line + MAX_DEFINITION_LINES)
    while end < limit:
        ln = lines[end]
        if ln.strip() and len(ln) - len(ln.lstrip()) <= indent:
            if ln.strip() in ("}", "};", "end", ")", "});", "]"):
                end += 1
            break
        end += 1
    return line, end


def identifiers_near(before: str, after: str) -> list[str]:
    """Identifiers (3+ characters, not keywords) in the text just before and after the
    cursor, the closest to the cursor first (before it, then after it)."""
    out: list[str] = []
    seen: set[str] = set()
    near_before = before[-NEAR_BEFORE_CHARS:]
    words = _IDENT.findall(near_before)
    if words and not near_before[-1:].isspace() and near_before.endswith(words[-1]):
        words.pop()  # the word being typed is not finished
    for w in reversed(words):
        if len(w) >= 3 and w not in _KEYWORDS and w not in seen:
            seen.add(w)
            out.append(w)
    for w in _IDENT.findall(after[:NEAR_AFTER_CHARS]):
        if len(w) >= 3 and w not in _KEYWORDS and w not in seen:
            seen.add(w)
            out.append(w)
    return out


def identifiers_of(text: str) -> list[str]:
    """The identifiers of ``text`` that can tell code apart: 3+ characters, not keywords
    (in order, repeats kept)."""
    return [w for w in _IDENT.findall(text) if len(w) >= 3 and w not in _KEYWORDS]
