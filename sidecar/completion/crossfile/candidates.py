"""What the workspace index offers a prompt (:func:`workspace_candidates`), in the order
``select.py`` takes them under the budget, after the recent edits of other open
documents:

1. **Definitions of the names near the cursor** (``identifiers_near``, closest first):
   a name the current file imports (``from m import name``, ``import {name} from
   './m'``, ``use m::Name``) gives its definition in the file the import resolves to
   (``resolve.py``); a module alias (``import m as alias``, ``const alias =
   require('./m')``, a Go package) gives that file's outline (3, below); any other name
   defined in at most ``MAX_AMBIGUOUS`` places of the workspace gives its definition
   there, files the current file imports first, then the nearest folder.
   Before them: after a member access (``x.``), the members of what ``x`` is (its
   class or type and the types it builds on, a union's shared base first; the type
   comes from a declaration, a JSDoc ``@param``, or a class the variable is named
   after); at a TypeScript object literal's key, the members of its declared type;
   after ``extends``, likely bases; where a name of its own starts (:func:`bare`),
   what the enclosing class inherits and, in Go and Java, the top-level names of the
   package's other files (:func:`_package_names`).
2. (the open documents' own definitions, which ``select.py`` puts here).
3. **Outlines of the imported workspace files**: the first line of each top-level
   definition and class member (``def``/``class``/``function``/``func``/``fn`` lines,
   constants, fields), in file order, at most ``MAX_OUTLINE_LINES`` lines; the modules
   whose names are used nearest the cursor first, then in import order, at most
   ``MAX_OUTLINES`` files.
4. **Similar code**: the ``MAX_SIMILAR`` chunks of other files most like the
   ``QUERY_LINES_BEFORE``/``QUERY_LINES_AFTER`` lines around the cursor (BM25 over
   identifiers, ``retrieve.py``).

A candidate is ``(kind, path, lines)``: ``kind`` is ``"definition"``, ``"outline"`` or
``"similar"``, ``path`` an absolute file path, ``lines`` the 0-based line numbers it
shows (ascending; an outline's are not contiguous). See docs/architecture.md ("The
workspace index").
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Hashable, Iterator
from typing import TypeVar

from .index import identifiers_of
from .parse import Definition, Import
from .retrieve import CHUNK_LINES
from .workspace import Entry, WorkspaceIndex

MAX_SIBLINGS = 3  # same-package files (Go, Java) treated as imported
MEMBER_LINES = 20  # lines of a receiver's members
SAME_PACKAGE_LANGUAGES = ("go", "java")
_RECEIVER = re.compile(r"([A-Za-z_$][\w$]*)[ \t]*(?:\.|::|->)[ \t]*[A-Za-z_$]?[\w$]*$")
MAX_AMBIGUOUS = 2  # a name defined in more places than this is not looked up by name alone
MAX_OUTLINES = 3
MAX_OUTLINE_LINES = 24
MAX_SIMILAR = 2
QUERY_LINES_BEFORE = 12
QUERY_LINES_AFTER = 4
DEFINITION_LINES = 12
HEADER_LINES = 6  # lines of a type's header read for the types it builds on
MAX_HEADER_CHARS = 600  # of them, searched for a union
MAX_SCORE_PAIRS = 100_000  # names x context words scored by substring; more: by whole subword
MAX_TYPES = 4  # a type and the types it builds on, for a receiver's members
_TOP_KINDS = ("function", "class", "type", "variable", "module")

Candidate = tuple[str, str, list[int]]
K = TypeVar("K", bound=Hashable)


def _span(lines: list[str], d: Definition) -> list[int]:
    """The lines of definition ``d`` to show: a class as its outline (its own line and
    its members' first lines), anything else from its first line, at most
    ``DEFINITION_LINES`` lines of its body."""
    end = min(d.end, d.line + DEFINITION_LINES, len(lines))
    return list(range(d.line, max(end, d.line + 1)))


_SUBWORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


_WORD = re.compile(r"[A-Za-z_$][\w$]*")
# ``this.name =`` (JavaScript, TypeScript) or ``self.name =`` (Python): a field the class
# assigns in its constructor or a method, which no definition names.
_SELF_FIELD = re.compile(r"^\s*(?:this|self)\.([A-Za-z_$][\w$]*)\s*(?::[^=]*)?=(?!=)")


@functools.lru_cache(maxsize=1 << 16)
def subwords(name: str) -> frozenset[str]:
    """The lower-case words of an identifier, 3+ letters, a plural's ``s`` dropped
    (``toLongString``: to, long, string -> ``{"long", "string"}``; ``equals`` ->
    ``{"equal"}``; ``snake_case`` and ``HTTPServer`` alike). Cached: the same
    workspace names are ranked at every new block."""
    out = set()
    for w in _SUBWORD.findall(name):
        if len(w) >= 3:
            w = w.lower()
            out.add(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return frozenset(out)


def context_words(text: str) -> frozenset[str]:
    """The subwords of every word of ``text``, keywords included (``throw`` says
    ``rethrow``)."""
    return frozenset(w for word in _WORD.findall(text) for w in subwords(word))


def _first_code_line(lines: list[str], line: int, end: int) -> int:
    """``line``, or the first line after it (before ``end``) that is not an annotation
    or decorator (``@Deprecated``, ``@Override``, ``@property``)."""
    while line + 1 < min(end, len(lines)) and lines[line].lstrip().startswith("@"):
        line += 1
    return line


def _private(line: str) -> bool:
    """A member another file cannot use: ``private`` in Java, C#, Kotlin, TypeScript."""
    return line.lstrip().startswith("private ")


def _members(
    entry: Entry,
    d: Definition | None,
    cap: int = DEFINITION_LINES,
    context: frozenset[str] = frozenset(),
    lines: list[str] | None = None,
) -> list[int]:
    """The first lines of a class's direct members (``d``; ``None``: the file's top-level
    definitions), one per name (the first overload): the class's own line, then
    functions and methods, then fields and constants (each in line order), at most
    ``cap`` lines, so that a budget cut keeps what can be called. With ``context``
    (the subwords of the code around the cursor, :func:`subwords`), members sharing
    more of its words come first (``Failable.`` in a ``catch`` block: ``rethrow``;
    ``TypeUtils.`` in ``toString()``: ``toLongString``), the order above breaking ties.
    With the file's ``lines``, a member's line is its first after its annotations, and
    ``private`` members are left out (the caller is another file)."""
    if d is None:
        inner = [x for x in entry.facts.definitions if x.depth == 0]
        head: list[int] = []
    else:
        inner = [
            x
            for x in entry.facts.definitions
            if d.line < x.line < d.end and x.depth == d.depth + 1 and x.name not in (d.name, "constructor")
        ]  # a constructor is not a member a caller names
        head = [_first_code_line(lines, d.line, d.end) if lines is not None else d.line]
    seen: set[str] = set()
    callables: list[int] = []
    others: list[int] = []
    names: dict[int, str] = {}
    for x in inner:
        if x.name in seen or x.name == "__all__":
            continue
        line = x.line
        if lines is not None:
            line = _first_code_line(lines, x.line, x.end)
            if line < len(lines) and _private(lines[line]):
                continue
        seen.add(x.name)
        names[line] = x.name
        (callables if x.kind in ("function", "method", "class") else others).append(line)
    if d is not None and lines is not None:  # fields a constructor or method assigns
        for n in range(d.line + 1, min(d.end, len(lines))):
            m = _SELF_FIELD.search(lines[n])
            if m is not None and m.group(1) not in seen:
                seen.add(m.group(1))
                names[n] = m.group(1)
                others.append(n)
    nested: set[int] = set()
    if d is not None:  # a class's nested types after its methods and fields, ranked or not
        nested = {x.line for x in inner if x.kind in ("class", "type")}
    ranked = [n for n in callables if n not in nested] + others
    tail = [n for n in callables if n in nested]
    if context:
        ranked, tail = _by_context(ranked, names, context), _by_context(tail, names, context)
    ranked += tail
    return head + ranked[: max(cap - len(head), 0)]


def _context_scores(keys: list[K], names: dict[K, str], context: frozenset[str]) -> dict[K, float]:
    """How much of the ``context`` words each name holds: a word of 4+ letters counts
    inside a name (``throw`` in ``rethrow``), a shorter one as a whole subword; each
    word weighs 1 / the number of ``keys`` whose names hold it, so a word most of them
    share (``not``, the class's own name) says little. ``{key: score}``, 0 for none.
    Where names times words exceed ``MAX_SCORE_PAIRS`` (a large package, a long comment
    near the cursor), every word counts only as a whole subword, looked up in one pass."""
    if len(keys) * len(context) > MAX_SCORE_PAIRS:
        holders_of: dict[str, list[K]] = {}
        for n in keys:
            for w in subwords(names[n]):
                holders_of.setdefault(w, []).append(n)
        fast: dict[K, float] = dict.fromkeys(keys, 0.0)
        for w in context:
            for n in holders_of.get(w, ()):
                fast[n] += 1.0 / len(holders_of[w])
        return fast
    lowered = {n: names[n].lower() for n in keys}
    parts = {n: subwords(names[n]) for n in keys} if any(len(w) < 4 for w in context) else {}

    def holds(n: K, w: str) -> bool:
        return w in lowered[n] if len(w) >= 4 else w in parts[n]

    scores: dict[K, float] = dict.fromkeys(keys, 0.0)
    for w in context:
        holders = [n for n in keys if holds(n, w)]
        for n in holders:
            scores[n] += 1.0 / len(holders)
    return scores


def _by_context(lines: list[K], names: dict[K, str], context: frozenset[str]) -> list[K]:
    """``lines`` (members, by line) with those whose names hold more of the ``context``
    words first (:func:`_context_scores`). Stable: ties keep the order given."""
    scores = _context_scores(lines, names, context)
    return sorted(lines, key=lambda n: -scores[n])


def outline(entry: Entry, lines: list[str]) -> list[int]:
    """An outline of a file: the first lines of its top-level definitions and of class
    members, at most ``MAX_OUTLINE_LINES`` (0-based line numbers)."""
    out: list[int] = []
    for d in entry.facts.definitions:
        if d.in_function or d.depth > 1:
            continue  # a local, or deeper than a class member
        if d.name == "__all__":
            continue
        if d.line < len(lines) and lines[d.line].strip():
            out.append(d.line)
    return sorted(set(out))[:MAX_OUTLINE_LINES]


def _definition_lines(entry: Entry, d: Definition, lines: list[str]) -> list[int]:
    if d.kind in ("class", "type") and d.end - d.line > 1:
        return _members(entry, d)
    return _span(lines, d)


def _worth(d: Definition) -> bool:
    """Whether a definition found by name alone is worth showing: a top-level function,
    class, type or constant (a method or attribute name alone says little of which
    class is meant)."""
    return d.depth == 0


def _is_test(rel: str) -> bool:
    rel = "/" + rel.replace(os.sep, "/")
    name = rel.rsplit("/", 1)[-1]
    return (
        "/tests/" in rel
        or "/test/" in rel
        or name.startswith("test_")
        or ".test." in name
        or ".spec." in name
        or name.endswith("_test.go")
    )


def _receiver(before: str) -> str | None:
    """The name before a member access that ends the text before the cursor
    (``Validate.`` or ``helpers.no``: ``Validate``, ``helpers``), else ``None``."""
    m = _RECEIVER.search(before[-200:])
    if m is None or m.group(1) in ("self", "this", "super", "cls"):
        return None
    return m.group(1)


def _declared_type(before: str, name: str) -> str | None:
    """The type the text before the cursor declares for the variable ``name``, the last
    declaration first: ``name: Type`` or ``name: undefined | Type`` (TypeScript,
    Python), ``@param {Type} name`` (JSDoc), ``Type name`` (Java, C, C#) or ``name
    Type`` / ``name *Type`` (Go). ``None`` when none is found."""
    n = re.escape(name)
    text = before[-20_000:]
    best: tuple[int, str] | None = None
    for pat in (
        rf"\b{n}\s*\??:\s*(?:(?:undefined|null)\s*\|\s*)?([A-Za-z_]\w*)",
        rf"@param\s+\{{([A-Z][\w$]*)(?:\[\])?\}}\s+\[?{n}\b",
        rf"\b([A-Z]\w*)(?:<[^<>;()]*>)?(?:\[\])?\s+{n}\b",
        rf"[(,]\s*{n}\s+\*?([A-Z]\w*)",
        rf"\bvar\s+{n}\s+\*?([A-Z]\w*)",
    ):
        for m in re.finditer(pat, text):
            if best is None or m.start() > best[0]:
                best = (m.start(), m.group(1))
    return best[1] if best else None


_LITERAL_OF = re.compile(r"[\w$\]]\s*\??:\s*([A-Z][\w$]*)(?:<[^=;{}]*>)?\s*=\s*$")
_KEY_SLOT = re.compile(r"(?:^|[{,])[ \t]*[A-Za-z_$]?[\w$]*$")


def _literal_type(before: str) -> str | None:
    """TypeScript: the declared type of the object literal in which the cursor starts a
    key (``const s: State = {`` ... ``mod``): ``State``; else ``None``. Braces in
    strings and comments are not told apart (a miss only loses a hint)."""
    last = before[before.rfind("\n") + 1 :]
    if not _KEY_SLOT.search(last):
        return None
    depth = 0
    text = before[-4000:]
    for i in range(len(text) - 1, -1, -1):
        c = text[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                m = _LITERAL_OF.search(text[max(0, i - 200) : i])
                return m.group(1) if m else None
            depth -= 1
    return None


def _header(lines: list[str], e: Entry | tuple[Definition, ...], d: Definition) -> str:
    """The lines of type ``d`` before its first member (its name, bases, a union's
    parts), at most ``HEADER_LINES``; ``e`` is its file's entry or definitions."""
    defs = e if isinstance(e, tuple) else e.facts.definitions
    first = min((x.line for x in defs if d.line < x.line < d.end and x.depth == d.depth + 1), default=d.end)
    return "\n".join(lines[d.line : max(min(first, d.line + HEADER_LINES, len(lines)), d.line + 1)])


def _type_chain(index: WorkspaceIndex, e: Entry, d: Definition) -> list[tuple[Entry, Definition]]:
    """Type ``d`` and the types its header names (``extends``/``implements`` bases,
    Python bases, the parts of a TypeScript union or intersection), breadth first, each
    found in at most ``MAX_AMBIGUOUS`` places (the same file first), at most
    ``MAX_TYPES`` in all: where the members of a value of type ``d`` are defined."""
    return _chain(index, e, d, MAX_TYPES, union_first=True)


_UNION = re.compile(r"=\s*(?:\|\s*)?[A-Za-z_$][\w$.<>, \t\n]*\|")


def _chain(
    index: WorkspaceIndex, e: Entry, d: Definition, cap: int, union_first: bool = False
) -> list[tuple[Entry, Definition]]:
    """``_type_chain`` with at most ``cap`` types. With ``union_first``, for a union
    (``type S = A | B``) the types every part builds on come right after it: a value of
    a union type offers only the members its parts share (TypeScript's rule), which
    stand in a common base."""
    if union_first and _UNION.search(_header(index.lines(e.path) or [], e, d)[:MAX_HEADER_CHARS]):
        wide = _chain(index, e, d, 3 * cap)
        direct = [(x, y) for x, y in wide[1:] if _part_of(index, e, d, y.name)]
        if len(direct) >= 2:
            common: set[tuple[str, int]] | None = None
            for pe, pd in direct:
                reach = {(x.path, y.line) for x, y in _chain(index, pe, pd, cap)[1:]}
                common = reach if common is None else common & reach
            common = common or set()
            shared = [(x, y) for x, y in wide if (x.path, y.line) in common]
            rest = [(x, y) for x, y in wide[1:] if (x.path, y.line) not in common]
            return ([(e, d), *shared, *rest])[:cap]
    out = [(e, d)]
    seen = {(e.path, d.line)}
    i = 0
    while i < len(out) and len(out) < cap:
        ce, cd = out[i]
        i += 1
        for name in dict.fromkeys(identifiers_of(_header(index.lines(ce.path) or [], ce, cd))):
            if name == cd.name or not name[:1].isupper():
                continue
            found = [(fe, fd) for fe, fd in index.definitions(name) if fd.depth == 0 and fd.kind in ("class", "type")]
            if not found or len(found) > MAX_AMBIGUOUS:
                continue
            found.sort(key=lambda x: x[0].path != ce.path)
            key = (found[0][0].path, found[0][1].line)
            if key in seen:
                continue
            seen.add(key)
            out.append(found[0])
            if len(out) >= cap:
                break
    return out


def _part_of(index: WorkspaceIndex, e: Entry, d: Definition, name: str) -> bool:
    """Whether ``name`` stands in the header of type ``d``."""
    return name in identifiers_of(_header(index.lines(e.path) or [], e, d))


_OWN_RECEIVER = re.compile(r"\b(?:self|this|super)[ \t]*\.[ \t]*[A-Za-z_$]?[\w$]*$")
_BASE_SLOT = re.compile(
    r"(?:\b(?:extends|implements)\s+(?:[\w.]+\s*,\s*)*|^\s*class\s+\w+\s*\((?:[\w.]+\s*,\s*)*)[\w.]*$"
)
_DECLARED = re.compile(r"\b(?:class|interface|struct|trait)\s+([A-Za-z_$][\w$]*)")
MAX_BASES = 3  # classes offered after ``extends``
MAX_PACKAGE_FILES = 64  # files of a Go package searched for a type's methods


def _inherited(
    index: WorkspaceIndex,
    path: str,
    own_definitions: tuple[Definition, ...],
    text: str,
    cursor_line: int | None,
    context: frozenset[str],
) -> list[Candidate]:
    """The members a class of the current file inherits from workspace classes: the
    innermost class around ``cursor_line`` (0-based), the types its header names
    (``extends Base``, ``class A(Base)``) and what those build on (``_type_members``);
    ``[]`` outside a class or when no base is in the workspace."""
    if cursor_line is None or not text:
        return []
    around = [d for d in own_definitions if d.kind in ("class", "type") and d.line <= cursor_line < d.end]
    if not around:
        return []
    d = max(around, key=lambda x: x.line)
    lines = text.split("\n")
    out: list[Candidate] = []
    for name in dict.fromkeys(identifiers_of(_header(lines, own_definitions, d))):
        if name == d.name or not name[:1].isupper():
            continue
        found = [
            (fe, fd)
            for fe, fd in index.definitions(name)
            if fe.path != path and fd.depth == 0 and fd.kind in ("class", "type")
        ]
        if found and len(found) <= MAX_AMBIGUOUS:
            out += _type_members(index, found[0][0], found[0][1], context)
    return out[:MAX_TYPES]


def _bases_for(index: WorkspaceIndex, path: str, before: str) -> list[Candidate]:
    """After ``extends`` / ``implements`` / Python's ``class A(``: the workspace's
    classes and types whose names share the most words with the class being declared
    (``ThresholdCircuitBreaker extends`` -> ``AbstractCircuitBreaker``), at most
    ``MAX_BASES``, each as its first line; ``[]`` elsewhere."""
    last = before.rsplit("\n", 1)[-1]
    if not _BASE_SLOT.search(last):
        return []
    m = _DECLARED.search(last)
    if m is None:
        return []
    words = subwords(m.group(1))
    if not words:
        return []
    scored = []
    for name in index.names():
        if name == m.group(1) or not name[:1].isupper():
            continue
        low = name.lower()
        if not any(w in low for w in words):
            continue  # cheap test first: a large workspace has tens of thousands of names
        hit = len(subwords(name) & words)
        if hit:
            scored.append((-hit, len(name), name))
    out: list[Candidate] = []
    for _h, _n, name in sorted(scored):
        found = [
            (fe, fd)
            for fe, fd in index.definitions(name)
            if fe.path != path and fd.depth == 0 and fd.kind in ("class", "type") and not _is_test(fe.rel)
        ]
        if not found or len(found) > MAX_AMBIGUOUS:
            continue
        fe, fd = found[0]
        out.append(("definition", fe.path, [_first_code_line(index.lines(fe.path) or [], fd.line, fd.end)]))
        if len(out) >= MAX_BASES:
            break
    return out


MAX_PACKAGE_NAMES = 8  # lines of a package's top-level names offered where a new name starts
MAX_PACKAGE_NAME_FILES = 3  # from so many files at most (each snippet costs its path line)
MAX_PACKAGE_DEFINITIONS = 4000  # definitions ranked at most (generated files of constants)
_MEMBER_ACCESS = re.compile(r"(?:\.|::|->)[ \t]*[A-Za-z_$]?[\w$]*$")
_PARTIAL = re.compile(r"[A-Za-z_$][\w$]*$")


def bare(before: str) -> bool:
    """Whether the cursor stands where a name of its own may start: at the end of
    ``before`` there is no member access (``x.``, ``x.pa``, ``a[0]->``, ``m::``)."""
    return _MEMBER_ACCESS.search(before[-200:]) is None


def _package_names(
    index: WorkspaceIndex, path: str, language: str, before: str, context: frozenset[str]
) -> list[Candidate]:
    """Go and Java, where a name of its own starts (:func:`bare`): the top-level names
    the current file's package declares in its other files, which the code may use with
    no import (a Go package's functions, variables, constants and types, not its
    methods; a Java package's classes). Ranked: names that begin with the word being
    typed first (one typed in full first of all), then by ``context``
    (:func:`_context_scores`; of equal scores, the name with the fewest words the
    context lacks: ``FailableFunction`` before ``FailableDoubleFunction``), names the
    text ``before`` the cursor already uses after the others (the model sees those),
    then file and line order; at most ``MAX_PACKAGE_NAMES`` lines from ``MAX_PACKAGE_NAME_FILES`` files, one candidate per file,
    the file of the best-ranked name first. ``[]`` for other languages."""
    if language not in SAME_PACKAGE_LANGUAGES:
        return []
    partial_m = _PARTIAL.search(before[-100:])
    partial = partial_m.group(0) if partial_m else ""
    used = set(identifiers_of(before[-4000 : len(before) - len(partial)]))  # not the word being typed
    in_test = _is_test(path)
    folder = os.path.dirname(path)
    ext = os.path.splitext(path)[1]
    kinds = ("class", "type") if language == "java" else ("function", "variable", "type", "class")

    def wanted(f: Entry, d: Definition) -> bool:
        return (
            f.path != path
            and os.path.splitext(f.path)[1] == ext  # the package's own language: no cgo C, no generator script
            and (in_test or not _is_test(f.rel))
            and d.depth == 0
            and d.kind in kinds  # a Go method is not called by a bare name
            and d.name not in ("init", "main", "_")
        )

    found: dict[tuple[str, int], Definition] = {}  # (file, line) -> definition, no file read
    if len(partial) >= 2:  # a name that begins with the word being typed, in any file of the folder
        for name in index.names():
            if name.startswith(partial):
                for f, d in index.definitions(name):
                    if os.path.dirname(f.path) == folder and wanted(f, d):
                        found[(f.path, d.line)] = d
    files = sorted(index.in_folder(folder), key=lambda f: f.path)
    for f in files[:MAX_PACKAGE_FILES]:
        for d in f.facts.definitions:
            if len(found) >= MAX_PACKAGE_DEFINITIONS:
                break
            if wanted(f, d):
                found[(f.path, d.line)] = d
    if not found:
        return []
    keys = sorted(found)  # file and line order breaks ties
    names = {k: d.name for k, d in found.items()}
    scores = _context_scores(keys, names, context)
    keys.sort(
        key=lambda k: (
            not (partial and names[k].startswith(partial)),
            names[k] != partial,  # a name typed in full: its own line first
            -scores[k],
            len(subwords(names[k]) - context),  # of equals, the one with fewest words the context lacks
            names[k] in used,
        )
    )
    by_file: dict[str, list[int]] = {}
    taken = 0
    for file, line in keys:
        if taken >= MAX_PACKAGE_NAMES:
            break
        if file in by_file or len(by_file) < MAX_PACKAGE_NAME_FILES:
            by_file.setdefault(file, []).append(line)
            taken += 1
    out: list[Candidate] = []
    for file, nums in by_file.items():
        lines = index.lines(file) or []  # only the chosen files are read
        out.append(("outline", file, sorted(_first_code_line(lines, n, found[(file, n)].end) for n in nums)))
    return out


def _go_methods(index: WorkspaceIndex, e: Entry, d: Definition, context: frozenset[str]) -> list[Candidate]:
    """Go: the methods of type ``d`` (``func (r *T) Name(``), which stand outside the
    type, in every file of its package; one candidate per file, the type's own file first,
    the methods ranked by ``context`` as ``_members`` ranks them."""
    pattern = re.compile(rf"^func\s*\(\s*\w*\s*\*?{re.escape(d.name)}\s*\)\s*([A-Za-z_]\w*)")
    out: list[Candidate] = []
    files = sorted(index.in_folder(os.path.dirname(e.path)), key=lambda f: (f.path != e.path, f.path))
    for f in files[:MAX_PACKAGE_FILES]:
        if _is_test(f.rel):
            continue
        lines = index.lines(f.path) or []
        names: dict[int, str] = {}
        for x in f.facts.definitions:
            if x.depth == 0 and x.line < len(lines):
                m = pattern.match(lines[x.line])
                if m is not None and m.group(1) == x.name:
                    names[x.line] = x.name
        if names:
            nums = _by_context(sorted(names), names, context) if context else sorted(names)
            out.append(("definition", f.path, nums[:MEMBER_LINES]))
    return out


def _type_members(
    index: WorkspaceIndex, e: Entry, d: Definition, context: frozenset[str] = frozenset(), skip: str = ""
) -> list[Candidate]:
    """The members of type ``d`` and of the types it builds on (``_type_chain``): one
    candidate per type, its own first; a type without members shows its header (a
    union's parts). A Go type's methods are found in its package (``_go_methods``).
    Nothing of the file ``skip`` (the current one: the model sees it)."""
    out: list[Candidate] = []
    for te, td in _type_chain(index, e, d):
        lines = index.lines(te.path) or []
        if te.path.endswith(".go"):
            if te.path != skip:
                out.append(("definition", te.path, [td.line]))
            out += [c for c in _go_methods(index, te, td, context) if c[1] != skip]
            continue
        if te.path == skip:
            continue
        nums = _members(te, td, MEMBER_LINES, context, lines)
        if len(nums) <= 1:
            nums = list(range(td.line, td.line + _header(lines, te, td).count("\n") + 1))
        out.append(("definition", te.path, nums))
    return out


def _named_class(index: WorkspaceIndex, variable: str) -> str | None:
    """The class a variable of no declared type is named after: ``option`` ->
    ``Option``, ``http_client`` -> ``HttpClient`` (a workspace class or type of exactly
    that name, any case), else ``None``."""
    if not variable[:1].islower():
        return None
    wanted = variable.replace("_", "").lower()
    for cand in (variable[:1].upper() + variable[1:], "".join(w.capitalize() for w in variable.split("_"))):
        if cand.lower() == wanted and any(d.kind in ("class", "type") for _e, d in index.definitions(cand)):
            return cand
    return None


def _members_of(
    index: WorkspaceIndex,
    path: str,
    receiver: str,
    local_names: dict[str, tuple[str, str]],
    aliases: dict[str, str],
    context: frozenset[str] = frozenset(),
) -> list[Candidate]:
    """What ``receiver.`` can be followed by: the members of the class or type it names
    and of the types that one builds on, or the top-level definitions of the module it
    is bound to (see the module doc); ``[]`` when the index does not know."""
    if receiver in aliases:
        f = aliases[receiver]
        e = index.entry(f)
        if e is None:
            return []
        return [("definition", f, _members(e, None, MEMBER_LINES, context, index.lines(f) or []))]
    target = local_names.get(receiver)
    found: list[tuple[Entry, Definition]] = []
    if target is not None:
        imported, f = target
        e = index.entry(f)
        if e is not None:
            found = [(e, d) for d in e.facts.definitions if d.name == imported]
    if not found:
        # A type of this very file still has members elsewhere: the types it builds on, a
        # Go type's methods in the package's other files (``_type_members`` skips the
        # current file's own lines).
        found = [(e, d) for e, d in index.definitions(receiver) if d.depth == 0]
        if any(e.path == path for e, _d in found):
            found = [(e, d) for e, d in found if e.path == path]
    found = [(e, d) for e, d in found if d.kind in ("class", "type", "module")]
    if not found or len(found) > MAX_AMBIGUOUS:
        return []
    e, d = found[0]
    if d.kind == "module":
        members = _members(e, d, MEMBER_LINES, context, index.lines(e.path) or [])
        return [("definition", e.path, members)] if d.end - d.line > 1 else []
    return _type_members(index, e, d, context, skip=path)


def member_names(
    index: WorkspaceIndex, path: str, language: str, imports: tuple[Import, ...], before: str
) -> tuple[str, ...]:
    """The names that may follow the member access ending ``before`` when the index is
    sure of them all, else ``()``: a module alias (Python ``import m as alias``, a Go
    package: its top-level names, exported ones for Go, with what a Python module imports;
    none when it has a wildcard import or ``__getattr__``), or a class named directly
    (``Validate.``) that extends nothing (its direct members). Variables, ``self`` and
    ``this``, JavaScript modules (whose exports are assignments) and classes with a base
    give ``()``: their members are not all in the index."""
    receiver = _receiver(before)
    if not receiver or language in ("javascript", "typescript", "tsx"):
        return ()
    for imp in imports:
        files = index.resolve(path, language, imp)
        if not files:
            continue
        bound = imp.local.split(".")[0] if (imp.local and language == "python" and imp.level == 0) else imp.local
        if imp.local and receiver in (bound, imp.local) and (language != "python" or imp.local == receiver):
            return _module_names(index, files if language == "go" else files[:1], language)
        for imported, local in imp.names:
            if local != receiver:
                continue
            e = index.entry(files[0])
            if e is None:
                return ()
            if language == "python" and not any(d.name == imported and d.depth == 0 for d in e.facts.definitions):
                sub = [f for f in files if os.path.splitext(os.path.basename(f))[0] == imported]
                return _module_names(index, sub[:1], language) if sub else ()  # from pkg import module
            return _class_names(index, e, imported)
    found = [(e, d) for e, d in index.definitions(receiver) if e.path != path and d.depth == 0 and d.kind == "class"]
    if len(found) != 1:
        return ()
    return _class_names(index, found[0][0], receiver)


def _module_names(index: WorkspaceIndex, files: list[str], language: str) -> tuple[str, ...]:
    names: set[str] = set()
    for f in files:
        e = index.entry(f)
        if e is None:
            return ()
        for imp in e.facts.imports:
            if any(n == "*" for n, _l in imp.names):
                return ()
            names.update(local for _n, local in imp.names)
            if imp.local:
                names.add(imp.local.split(".")[0])
        names.update(d.name for d in e.facts.definitions if d.depth == 0)
    if "__getattr__" in names:
        return ()
    if language == "go":
        names = {n for n in names if n[:1].isupper()}
    return tuple(sorted(names))


def _class_names(index: WorkspaceIndex, e: Entry, name: str) -> tuple[str, ...]:
    lines = index.lines(e.path) or []
    for d in e.facts.definitions:
        if d.name != name or d.depth != 0 or d.kind != "class" or d.line >= len(lines):
            continue
        head = lines[d.line]
        if re.search(r"\b(extends|implements)\b", head) or re.search(
            r"^\s*class\s+\w+\s*\((?!\s*(object)?\s*\))", head
        ):
            return ()  # members it inherits are not all here
        return tuple(sorted({x.name for x in e.facts.definitions if d.line < x.line < d.end and x.depth == 1}))
    return ()


def _siblings(index: WorkspaceIndex, path: str, text: str) -> list[str]:
    """Other files of ``path``'s folder (a Go or Java package sees their names without
    an import), the ones whose names ``text`` uses most first, at most ``MAX_SIBLINGS``."""
    words = set(identifiers_of(text))
    scored = []
    for e in index.in_folder(os.path.dirname(path)):
        if e.path == path or _is_test(e.rel) != _is_test(path):
            continue
        used = sum(1 for d in e.facts.definitions if d.depth == 0 and d.name in words)
        if used:
            scored.append((-used, e.path))
    return [p for _u, p in sorted(scored)[:MAX_SIBLINGS]]


def _submodule(index: WorkspaceIndex, files: list[str], name: str) -> str | None:
    """For Python's ``from pkg import name``: the file of submodule ``name`` among the
    import's resolved ``files`` when the package itself defines no top-level ``name``."""
    e = index.entry(files[0])
    if e is not None and any(d.name == name and d.depth == 0 for d in e.facts.definitions):
        return None
    sub = [f for f in files if os.path.splitext(os.path.basename(f))[0] == name]
    return sub[0] if sub else None


def _imports_of(
    index: WorkspaceIndex, path: str, language: str, imports: tuple[Import, ...]
) -> Iterator[tuple[Import, list[str]]]:
    for imp in imports:
        files = index.resolve(path, language, imp)
        if files:
            yield imp, files


def workspace_candidates(
    index: WorkspaceIndex,
    path: str,
    language: str,
    imports: tuple[Import, ...],
    names: list[str],
    before: str,
    after: str,
    own_definitions: tuple[Definition, ...] = (),
    text: str = "",
    cursor_line: int | None = None,
) -> tuple[list[Candidate], list[Candidate]]:
    """The index's candidates for a request in the file ``path`` (see the module doc):
    the definitions of imported names near the cursor (step 1), and the rest (steps 1
    to 4), between which ``select.py`` puts the open documents' definitions.
    ``imports`` are the current document's (``parse.facts`` of its text), ``names`` the
    identifiers near the cursor, closest first; ``own_definitions`` the current
    document's definitions (names it defines are not looked up elsewhere); ``text``
    the current document's text (which same-package files it uses most); ``cursor_line``
    (0-based) finds the class the cursor is in, for the members it inherits."""
    resolved = list(_imports_of(index, path, language, imports))
    if language in SAME_PACKAGE_LANGUAGES:
        for sib in _siblings(index, path, text):
            resolved.append((Import(""), [sib]))
    index.want(f for _imp, files in resolved for f in files[:1])
    local_names: dict[str, tuple[str, str]] = {}  # local -> (imported name, file)
    aliases: dict[str, str] = {}  # module alias -> file
    module_order: list[str] = []
    for imp, files in resolved:
        f = files[0]
        module_order.append(f)
        if imp.local:
            aliases.setdefault(imp.local.split(".")[0] if language == "python" else imp.local, f)
            aliases.setdefault(imp.local, f)
        for imported, local in imp.names:
            sub = _submodule(index, files, imported) if language == "python" else None
            if sub is not None:
                aliases.setdefault(local, sub)  # ``from pkg import module``: ``module.`` is that file
            else:
                local_names.setdefault(local, (imported, f))
    out: list[Candidate] = []
    near_modules: list[str] = []
    later: list[str] = []
    receiver = _receiver(before)
    if receiver and receiver not in local_names and receiver not in aliases:
        receiver = _declared_type(before, receiver) or _named_class(index, receiver) or receiver
    elif receiver is None and language in ("typescript", "tsx") and bare(before):
        receiver = _literal_type(before)  # a key of a typed object literal: the type's members
    query_text = (
        "\n".join(before.split("\n")[-QUERY_LINES_BEFORE:]) + "\n" + "\n".join(after.split("\n")[:QUERY_LINES_AFTER])
    )
    context = context_words(query_text)
    if receiver:
        out += _members_of(index, path, receiver, local_names, aliases, context)
    bases = _bases_for(index, path, before)
    out += bases
    inherited = _inherited(index, path, own_definitions, text, cursor_line, context)
    if _OWN_RECEIVER.search(before[-200:]):
        out += inherited  # ``this.`` / ``self.``: what the class inherits comes first
        inherited = []
    elif bare(before) and not bases:
        # Where a name of its own starts, the names the code may use that the text
        # before the cursor has not shown: what the class inherits, the package's own.
        out += inherited + _package_names(index, path, language, before, context)
        inherited = []
    for name in names:
        if name in local_names:
            imported, f = local_names[name]
            e = index.entry(f)
            if e is None:
                continue
            lines = index.lines(f) or []
            for d in e.facts.definitions:
                if d.name == imported:
                    out.append(("definition", f, _definition_lines(e, d, lines)))
                    break
            near_modules.append(f)
        elif name in aliases:
            near_modules.append(aliases[name])
        else:
            later.append(name)
    first, out = out, []
    own = {d.name for d in own_definitions}
    in_test = _is_test(path)
    imported_files = set(module_order)
    here = os.path.dirname(path)
    for name in later:
        if name in own:
            continue  # the current file defines it: the model sees it there
        found = [
            (e, d)
            for e, d in index.definitions(name)
            if e.path != path and _worth(d) and (in_test or not _is_test(e.rel))
        ]
        if not found or len(found) > MAX_AMBIGUOUS:
            continue
        found.sort(
            key=lambda ed: (
                _is_test(ed[0].rel) and not _is_test(path),
                ed[0].path not in imported_files,
                -len(os.path.commonpath([here, os.path.dirname(ed[0].path)])),
            )
        )
        e, d = found[0]
        lines = index.lines(e.path) or []
        out.append(("definition", e.path, _definition_lines(e, d, lines)))
    out += inherited  # members a bare call in a subclass may name
    outlined = 0
    for f in list(dict.fromkeys(near_modules + module_order)):
        if outlined >= MAX_OUTLINES:
            break
        e = index.entry(f)
        flines = index.lines(f) if e is not None else None
        if e is None or not flines:
            continue
        ol = outline(e, flines)
        if len(ol) >= 2:
            out.append(("outline", f, ol))
            outlined += 1
    for e, line in index.similar(identifiers_of(query_text), [path], MAX_SIMILAR):
        out.append(("similar", e.path, list(range(line, line + CHUNK_LINES))))
    return first, out
