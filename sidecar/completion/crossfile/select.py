"""Choosing the snippets of other open documents for a request (:class:`CrossFileContext`).

What is offered, in order, under ``budget`` cl100k tokens (``snippet.budget``): the
lines around each recent edit of another open document (``EDIT_CONTEXT_LINES`` above
and below the edited line, ``edits.py``; documents edited most recently first), then the
definitions of identifiers used near the cursor (``index.py``; identifiers closest to
the cursor first). A candidate that overlaps one already chosen from the same document
is skipped; one that does not fit is cut at a line end to the room left (at least
``MIN_SNIPPET_TOKENS``), else skipped. At most ``MAX_SNIPPETS`` snippets. The chosen
snippets are ordered by path, then line, so the block is deterministic.

Never included: the current document, documents the client has closed (only the store
of open documents is read, and a closed document's edit record is dropped), documents
over ``MAX_DOC_CHARS`` characters or with a NUL in their first 8 KiB (binary), and
regions with a line over ``MAX_LINE_CHARS`` characters (minified code).

**Prefix stability.** The snippet block comes first in the prompt, so a local engine
keeps its KV cache only while the block stays the same. The choice is therefore
recomputed only when (a) the set of other open documents or the text of one changed,
(b) the cursor moved to another ``ALIGN_LINES``-line block (the same blocks as the
prefix window's alignment in ``context.py``), or (c) an identifier near the cursor
appeared that is defined in another open document and was not seen before in this block
(its definition is what the user is about to need). Typing anything else keeps the same
snippets, byte for byte.

Costs are counted as the snippets are rendered (``prompts/snippets.py``): a path line
and separators per snippet and a comment marker per line at most; this module never
imports the prompt side. See docs/architecture.md ("What the model sees").
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from .. import tokens
from .candidates import Candidate, member_names, workspace_candidates
from .edits import EditLog
from .index import _definition_span, _index, _Indexed, identifiers_near
from .languages import language_of_id
from .parse import Definition, Import, facts
from .snippet import Snippet
from .workspace import WorkspaceIndex

log = logging.getLogger(__name__)

ALIGN_LINES = 16  # the prefix window's alignment (context.ALIGN_LINES)
EDIT_CONTEXT_LINES = 6  # lines above and below an edited line
MAX_SNIPPETS = 6
MIN_SNIPPET_TOKENS = 24
MAX_DOC_CHARS = 1_000_000
MAX_LINE_CHARS = 400
_OVERHEAD_TOKENS = 4  # path line and separators of one snippet, roughly
_LINE_MARK_TOKENS = 2  # the comment marker (and its space or closer) on each snippet line
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass
class _State:
    key: tuple
    names: list[str]
    seen: set[str]
    snippets: tuple[Snippet, ...] = ()
    imports: tuple[Import, ...] = ()  # the current document's, when the workspace index serves it
    defines: tuple[Definition, ...] = ()  # the current document's definitions, likewise
    text: str = ""  # the current document's text when they were read
    imported: frozenset[str] = frozenset()  # the local names those imports bind


# A candidate: (kind, key of its file, uri or path for naming it, 0-based line numbers,
# the file's lines).
_Cand = tuple[str, str, str, list[int], list[str]]


class CrossFileContext:
    """Chooses snippets of other open documents and of the workspace for a request (see
    module doc).

    ``documents()`` returns the open documents, ``{uri: document}``, each with
    ``source`` and ``language_id`` (pygls' workspace ``text_documents``);
    ``root()`` returns the workspace root path (or None); ``index`` is the workspace
    index (``workspace.py``), used while ``index_on()`` says so. ``excluded(path)``
    names the content-exclusion rule that covers an absolute file path (``exclusion.py``):
    no snippet of such a file is ever chosen.
    """

    MAX_STATES = 16

    def __init__(
        self,
        documents: Callable[[], Mapping[str, Any]],
        root: Callable[[], str | None] = lambda: None,
        index: WorkspaceIndex | None = None,
        index_on: Callable[[], bool] = lambda: True,
        excluded: Callable[[str], str | None] = lambda path: None,
    ) -> None:
        self._documents = documents
        self._excluded = excluded
        self._root = root
        self.index = index
        self._index_on = index_on
        self.edits = EditLog()
        self._indexed: dict[str, _Indexed] = {}
        self._states: dict[str, _State] = {}
        self.focus: str | None = None  # the document of the last selection
        self.recomputed = 0  # how many times a choice was computed (tests, stats)

    # ----------------------------------------------------------- document events
    def record_change(self, uri: str, changes: Iterable[Any]) -> None:
        """``didChange``: remember where ``uri`` was edited."""
        self.edits.record(uri, changes)

    def closed(self, uri: str) -> None:
        """``didClose``: forget everything about ``uri``."""
        self.edits.forget(uri)
        self._indexed.pop(uri, None)
        self._states.pop(uri, None)
        if self.focus == uri:
            self.focus = None

    # ----------------------------------------------------------- exclusion
    def excluded(self, name: str) -> str | None:
        """The content-exclusion rule covering ``name`` (a URI of any scheme, matched by
        its path: ``file:///a/b.py``, ``file:/a/b.py``, ``vscode-notebook-cell:/a/n.ipynb#c1``;
        or an absolute path), or None."""
        if _SCHEME.match(name):
            name = unquote(urlparse(name).path)
        return self._excluded(name) if name else None

    # ----------------------------------------------------------- naming
    def path_of(self, uri: str) -> str:
        """``uri`` as a path relative to the workspace root, or its file name outside it
        (no user directories leave the machine)."""
        parsed = urlparse(uri)
        path = unquote(parsed.path) if parsed.scheme in ("file", "") else unquote(parsed.path or uri)
        return self._display(path, parsed.scheme in ("file", "")) or uri

    def _display(self, path: str, local: bool = True) -> str:
        """A file path as the prompt names it: relative to the workspace root, else to
        its workspace folder, else its file name."""
        if local:
            for base in (self._root(), self.index.folder_of(path) if self.index is not None else None):
                if not base:
                    continue
                try:
                    rel = os.path.relpath(path, base)
                except ValueError:
                    rel = ""
                if rel and not rel.startswith(".."):
                    return rel.replace(os.sep, "/")
        return path.rstrip("/").rsplit("/", 1)[-1]

    def repo_name(self) -> str:
        """The workspace root's directory name ("" without a root)."""
        root = self._root()
        if not root and self.index is not None and self.index.folders:
            root = self.index.folders[0]
        return os.path.basename(os.path.normpath(root)) if root else ""

    # ----------------------------------------------------------- selection
    def select(self, uri: str, cursor_line: int, before: str, after: str, budget: int) -> tuple[Snippet, ...]:
        """Snippets for a request in ``uri`` at 0-based ``cursor_line``; ``before`` and
        ``after`` are the text before and after the cursor (only the last
        ``NEAR_BEFORE_CHARS`` / first ``NEAR_AFTER_CHARS`` characters are read).
        ``budget`` is in cl100k tokens; 0 gives ``()``."""
        self.focus = uri
        if budget <= 0:
            return ()
        others = self._others(uri)
        ws = self._workspace_for(uri)
        if not others and ws is None:
            self._states.pop(uri, None)
            return ()
        budget -= tokens.count(self.path_of(uri)) + _OVERHEAD_TOKENS  # the current file's own Path line
        if budget < MIN_SNIPPET_TOKENS:
            return ()
        sig = tuple((u, d.stamp, self.edits.stamp(u)) for u, d in others)
        key = (cursor_line // ALIGN_LINES, sig, budget, None if ws is None else (ws[0].epoch, ws[1]))
        names_now = identifiers_near(before, after)
        st = self._states.get(uri)
        if st is not None and st.key == key:
            new = [n for n in names_now if n not in st.seen]
            if not new:
                return st.snippets
            st.seen.update(new)
            fresh = [n for n in new if n in st.imported or any(n in d.defs for _u, d in others)]
            if not fresh:
                return st.snippets
            st.names.extend(fresh)
        else:
            st = _State(key, list(names_now), set(names_now))
            if ws is not None:
                st.imports, st.defines, st.text = self._facts_of(uri, ws[2])
                st.imported = frozenset(
                    n for imp in st.imports for n in ([imp.local] if imp.local else []) + [loc for _i, loc in imp.names]
                )
            self._states[uri] = st
            while len(self._states) > self.MAX_STATES:
                self._states.pop(next(iter(self._states)))
        st.snippets = self._choose(others, st, budget, ws, before, after, cursor_line)
        self.recomputed += 1
        return st.snippets

    def members_at(self, uri: str, before: str) -> tuple[str, ...]:
        """The member names the workspace index is sure may follow the member access that
        ends ``before`` in ``uri`` (``candidates.member_names``), for the healing
        grammar; ``()`` when it is not sure, or for a document it does not serve. Uses
        the imports read at the last :meth:`select` of ``uri``."""
        ws = self._workspace_for(uri)
        st = self._states.get(uri)
        if ws is None or st is None:
            return ()
        try:
            return member_names(ws[0], ws[1], ws[2], st.imports, before)
        except Exception:  # noqa: BLE001 - never fail a request over a hint
            log.warning("workspace index: member lookup failed", exc_info=True)
            return ()

    def _workspace_for(self, uri: str) -> tuple[WorkspaceIndex, str, str] | None:
        """``(index, path, language)`` when the workspace index serves ``uri``."""
        ix = self.index
        if ix is None or not self._index_on():
            return None
        parsed = urlparse(uri)
        if parsed.scheme != "file":
            return None
        path = os.path.abspath(unquote(parsed.path))
        if ix.folder_of(path) is None:
            return None
        doc = self._documents().get(uri)
        language = language_of_id(getattr(doc, "language_id", "") or "", path)
        if language is None:
            return None
        return ix, path, language

    def _facts_of(self, uri: str, language: str) -> tuple[tuple[Import, ...], tuple[Definition, ...], str]:
        """The current document's imports, definitions (``parse.facts``) and text."""
        doc = self._documents().get(uri)
        try:
            text = doc.source if doc is not None else ""
        except Exception:  # noqa: BLE001 - a document pygls cannot read
            return (), (), ""
        if not isinstance(text, str) or len(text) > MAX_DOC_CHARS or "\x00" in text[:8192]:
            return (), (), ""
        fx = facts(text, language)
        return fx.imports, fx.definitions, text

    def _others(self, uri: str) -> list[tuple[str, _Indexed]]:
        """Open documents other than ``uri`` that may give snippets, indexed, by uri."""
        out = []
        docs = self._documents()
        for u in sorted(docs):
            if u == uri or self.excluded(u):
                continue
            doc = docs[u]
            try:
                text = doc.source
            except Exception:  # noqa: BLE001 - a document pygls cannot read
                continue
            if not isinstance(text, str) or len(text) > MAX_DOC_CHARS or "\x00" in text[:8192]:
                continue
            ix = self._indexed.get(u)
            stamp = hash(text)  # cached by the string: free while the document is unchanged
            if ix is None or ix.stamp != stamp:
                lines, defs = _index(text, getattr(doc, "language_id", "") or "")
                ix = _Indexed(stamp, lines, defs)
                self._indexed[u] = ix
            out.append((u, ix))
        for u in [u for u in self._indexed if u not in docs]:
            del self._indexed[u]  # closed without a didClose we saw
        return out

    def _choose(
        self,
        others: list[tuple[str, _Indexed]],
        st: _State,
        budget: int,
        ws: tuple[WorkspaceIndex, str, str] | None,
        before: str,
        after: str,
        cursor_line: int | None = None,
    ) -> tuple[Snippet, ...]:
        by_recency = sorted(others, key=lambda o: (-self.edits.stamp(o[0]), o[0]))
        candidates: list[_Cand] = []
        for u, ix in by_recency:
            for line in self.edits.regions(u):
                line = min(max(line, 0), max(len(ix.lines) - 1, 0))
                lo, hi = max(0, line - EDIT_CONTEXT_LINES), line + EDIT_CONTEXT_LINES + 1
                candidates.append(("edit", _key(u), u, list(range(lo, min(hi, len(ix.lines)))), ix.lines))
        open_defs: list[_Cand] = []
        for name in st.names:
            for u, ix in by_recency:
                at = ix.defs.get(name)
                if at is not None and at < len(ix.lines):
                    start, end = _definition_span(ix.lines, at)
                    open_defs.append(("definition", _key(u), u, list(range(start, end)), ix.lines))
        if ws is None:
            candidates += open_defs
        else:
            index, path, language = ws
            lines_of: dict[str, list[str]] = {}

            def cands(found: list[Candidate]) -> list[_Cand]:
                out: list[_Cand] = []
                for kind, f, nums in found:
                    if f not in lines_of:
                        lines_of[f] = index.lines(f) or []
                    out.append((kind, f, f, nums, lines_of[f]))
                return out

            try:
                imported, rest = workspace_candidates(
                    index, path, language, st.imports, st.names, before, after, st.defines, st.text, cursor_line
                )
            except Exception:  # noqa: BLE001 - a hint never fails a request: it goes without the index's snippets
                log.warning("workspace index: choosing snippets failed at %s:%s", path, cursor_line, exc_info=True)
                imported, rest = [], []
            candidates += cands(imported) + open_defs + cands(rest)
        return self._fit(candidates, budget)

    def _fit(self, candidates: list[_Cand], budget: int) -> tuple[Snippet, ...]:
        """Take candidates in order while they fit ``budget`` (see module doc)."""
        chosen: list[Snippet] = []
        taken: dict[str, set[int]] = {}
        used = 0
        for kind, key, name, nums, all_lines in candidates:
            if len(chosen) >= MAX_SNIPPETS or budget - used < MIN_SNIPPET_TOKENS:
                break
            if self.excluded(name):
                continue  # a rule added after the file was indexed or opened
            nums = [n for n in nums if 0 <= n < len(all_lines)]
            have = taken.get(key, set())
            if kind == "outline":
                nums = [n for n in nums if n not in have]
            elif any(n in have for n in nums):
                continue
            while nums and not all_lines[nums[0]].strip():
                nums.pop(0)
            while nums and not all_lines[nums[-1]].strip():
                nums.pop()
            lines = [all_lines[n].rstrip() for n in nums]
            if not lines or any(len(ln) > MAX_LINE_CHARS or _CONTROL.search(ln) for ln in lines):
                continue  # minified, or NUL / control characters (binary data past the first 8 KiB)
            text = "\n".join(lines)
            path = self.path_of(name) if "://" in name else self._display(name)
            head_cost = tokens.count(path) + _OVERHEAD_TOKENS

            def cost_of(t: str, head_cost: int = head_cost) -> int:  # as rendered: a comment marker per line at most
                return head_cost + tokens.count(t) + _LINE_MARK_TOKENS * (t.count("\n") + 1)

            cost = cost_of(text)
            if used + cost > budget:
                room = budget - used - head_cost
                if room < MIN_SNIPPET_TOKENS:
                    continue
                text = tokens.head(text + "\n", room).rstrip("\n")
                while text and used + cost_of(text) > budget:  # drop lines until it fits
                    text = text.rsplit("\n", 1)[0] if "\n" in text else ""
                if not text.strip():
                    continue
                cost = cost_of(text)
            shown = nums[: text.count("\n") + 1]
            taken.setdefault(key, set()).update(shown)
            chosen.append(Snippet(path=path, text=text, line=shown[0], kind=kind))
            used += cost
        return tuple(sorted(chosen, key=lambda s: (s.path, s.line)))


#: A URI's scheme (two characters at least: ``C:`` is a Windows drive).
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+:")


def _key(uri: str) -> str:
    """One key per file for an open document's uri and an indexed path alike."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return os.path.abspath(unquote(parsed.path))
    return uri
