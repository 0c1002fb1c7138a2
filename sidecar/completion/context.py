"""What the model sees: prefix and suffix windows around the cursor, under a token budget."""

from __future__ import annotations

from dataclasses import dataclass

from . import tokens
from .crossfile import Snippet

# Documents past this size are still served, but only the windows around the cursor are
# ever read; a NUL in the windows marks a binary file, which gets no completion.
MAX_LINE_CHARS = 10_000


class NotCompletable(ValueError):
    """The cursor context is not something to complete (binary content, a huge line)."""


@dataclass(frozen=True)
class CompletionContext:
    """Text around the cursor, with line breaks normalized to ``\\n``.

    ``prefix``/``suffix`` are the windows sent to the model (at most ``prefix_tokens`` /
    ``suffix_tokens`` cl100k tokens); ``line_prefix``/``line_suffix`` are the cursor
    line's text before/after the cursor; ``eol`` is the document's line break, used when
    inserting multi-line text.
    """

    prefix: str
    suffix: str
    line_prefix: str
    line_suffix: str
    language: str
    eol: str
    #: Other open documents' snippets for the prompt (``crossfile/``); ``path`` is this
    #: document's workspace-relative path and ``repo`` the workspace's name (both only
    #: used with snippets).
    snippets: tuple[Snippet, ...] = ()
    path: str = ""
    repo: str = ""
    #: The member names that may follow the member access at the cursor, when the
    #: workspace index is sure of them (``crossfile/candidates.py``, ``member_names``):
    #: a llama.cpp engine is then made to start with one of them (``healing/plan.py``).
    members: tuple[str, ...] = ()
    #: The content-exclusion rule covering this document ("" when none,
    #: ``crossfile/exclusion.py``): no cloud backend is asked to complete in it.
    private: str = ""

    @property
    def mid_line(self) -> bool:
        """True when non-blank text follows the cursor on its line."""
        return bool(self.line_suffix.strip())

    @property
    def multiline(self) -> bool:
        """Whether a suggestion may span lines: only on a blank (or indent-only) line, or
        at the end of a line that opens a block (``:``, ``{``, ``=>``). Elsewhere the user
        is finishing a statement, and one line is faster and wastes fewer tokens."""
        if self.mid_line:
            return False
        stripped = self.line_prefix.rstrip()
        return not stripped or stripped.endswith((":", "{", "=>"))


def detect_eol(text: str) -> str:
    i = text.find("\n")
    if i > 0 and text[i - 1] == "\r":
        return "\r\n"
    if i < 0 and "\r" in text:
        return "\r"
    return "\n"


ALIGN_LINES = 16


def snap_suffix(suffix: str) -> str:
    """End a suffix window that the budget cut short where a block ends: after its last
    blank line, else after its last complete line; the cursor's own line is always kept.

    A fill-in-the-middle model learns suffixes that run to the end of a file. Given one
    cut in the middle of a function, Qwen2.5-Coder-0.5B often wrote what follows the cut
    instead of what belongs at the cursor (``if (in->fd == -1) {`` in a struct, after a
    suffix that ended inside ``reader_open``). Ending at a blank line makes the cut look
    like the end of a unit. It also keeps the window's end still while the user types on
    one line (docs/architecture.md, "Local code models")."""
    first = suffix.find("\n")
    if first < 0:
        return suffix
    blank = suffix.rfind("\n\n")
    if blank > first:
        return suffix[: blank + 1]
    last = suffix.rfind("\n")
    return suffix[: last + 1] if last > first else suffix


def build_context(
    text: str, offset: int, language: str, prefix_tokens: int, suffix_tokens: int, cursor_line: int | None = None
) -> CompletionContext:
    """Cut the windows around string offset ``offset`` of ``text``.

    When the prefix is longer than its budget, the window starts at a line whose number
    (0-based, ``cursor_line`` being the cursor's) is a multiple of ``ALIGN_LINES``: as the
    user types, consecutive prompts then keep the same beginning for 16 lines at a time
    instead of shifting by a line, so a local engine reuses its KV cache for the shared
    prefix. Without ``cursor_line`` it is counted from ``text``.

    Raises NotCompletable for binary content (NUL characters near the cursor) or a cursor
    line longer than ``MAX_LINE_CHARS`` characters (minified code).
    """
    eol = detect_eol(text)
    line_start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    line_end = min((i for i in (text.find("\n", offset), text.find("\r", offset)) if i >= 0), default=len(text))
    if line_end - line_start > MAX_LINE_CHARS:
        raise NotCompletable(f"the cursor line is longer than {MAX_LINE_CHARS} characters")
    raw_prefix = text[max(0, offset - prefix_tokens * 8) : offset]
    raw_suffix = text[offset : offset + suffix_tokens * 8 + MAX_LINE_CHARS]
    if "\x00" in raw_prefix[-4096:] or "\x00" in raw_suffix[:4096]:
        raise NotCompletable("the document looks binary (NUL characters near the cursor)")
    if eol != "\n":
        raw_prefix = raw_prefix.replace("\r\n", "\n").replace("\r", "\n")
        raw_suffix = raw_suffix.replace("\r\n", "\n").replace("\r", "\n")
    line_prefix = raw_prefix[raw_prefix.rfind("\n") + 1 :]
    nl = raw_suffix.find("\n")
    line_suffix = raw_suffix if nl < 0 else raw_suffix[:nl]
    prefix = tokens.tail(raw_prefix, prefix_tokens)
    if len(prefix) < len(raw_prefix) or offset > len(raw_prefix):
        if cursor_line is None:
            cursor_line = text.count("\n", 0, offset) if eol != "\r" else text.count("\r", 0, offset)
        skip = (-(cursor_line - prefix.count("\n"))) % ALIGN_LINES
        for _ in range(skip):
            nl = prefix.find("\n")
            if nl < 0 or nl == len(prefix) - 1 or prefix.count("\n") <= 1:
                break
            prefix = prefix[nl + 1 :]
    suffix = tokens.head(raw_suffix, suffix_tokens)
    if len(suffix) < len(raw_suffix):
        suffix = snap_suffix(suffix)
    return CompletionContext(
        prefix=prefix,
        suffix=suffix,
        line_prefix=line_prefix,
        line_suffix=line_suffix,
        language=language or "plaintext",
        eol=eol,
    )
