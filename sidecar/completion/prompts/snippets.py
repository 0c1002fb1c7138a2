"""Other open documents' snippets (``crossfile/``) in each wire format.

Which format a prompt gets (``build.py``, ``infill.py`` choose):

- Qwen2.5-Coder with the ``template`` strategy: its repository format
  (:func:`repo_block`: ``<|repo_name|>``, ``<|file_sep|>`` per file, the current file
  last);
- llama-server ``/infill``: ``input_extra`` items (:func:`input_extra`);
- the ``chat`` strategy: a short "Other files:" section (:func:`chat_section`);
- every other strategy: a comment block in the current file's language
  (:func:`comment_block`: a ``Path:`` line per snippet, then the current file's path)
  before the prefix.

Snippets of one file are joined by a ``...`` line (:func:`by_file`). ``crossfile/``
counts its budget as these render and keeps the cache key's part (``digest``); it never
imports this module nor offers these names: callers import them from here. See
docs/architecture.md ("What the model sees").
"""

from __future__ import annotations

from ..crossfile.snippet import Snippet

_LINE_COMMENTS = {
    "#": (
        "python",
        "shellscript",
        "sh",
        "bash",
        "zsh",
        "fish",
        "ruby",
        "perl",
        "r",
        "yaml",
        "toml",
        "dockerfile",
        "makefile",
        "cmake",
        "powershell",
        "elixir",
        "nim",
        "julia",
        "coffeescript",
        "graphql",
        "terraform",
        "hcl",
        "ini",
        "properties",
        "plaintext",
        "text",
        "",
    ),
    "--": ("sql", "lua", "haskell", "elm", "ada", "vhdl"),
    ";": ("clojure", "lisp", "scheme", "racket", "asm", "nasm"),
    "%": ("erlang", "latex", "tex", "matlab", "prolog"),
    "'": ("vb",),
}
_BLOCK_COMMENTS = {
    "html": ("<!--", "-->"),
    "xml": ("<!--", "-->"),
    "markdown": ("<!--", "-->"),
    "vue": ("<!--", "-->"),
    "svelte": ("<!--", "-->"),
    "css": ("/*", "*/"),
    "scss": ("/*", "*/"),
    "less": ("/*", "*/"),
}


def _comment_style(language: str) -> tuple[str, str]:
    lang = (language or "").lower()
    if lang in _BLOCK_COMMENTS:
        return _BLOCK_COMMENTS[lang]
    for mark, langs in _LINE_COMMENTS.items():
        if lang in langs:
            return mark, ""
    return "//", ""


def by_file(snippets: tuple[Snippet, ...]) -> list[tuple[str, str]]:
    """``(path, text)`` per file: snippets of one file (adjacent, as ``select`` orders
    them) joined by a ``...`` line."""
    out: list[tuple[str, str]] = []
    for s in snippets:
        if out and out[-1][0] == s.path:
            out[-1] = (s.path, f"{out[-1][1]}\n...\n{s.text}")
        else:
            out.append((s.path, s.text))
    return out


def comment_block(snippets: tuple[Snippet, ...], language: str, path: str) -> str:
    """The snippets as comment lines in ``language`` (a ``Path:`` line per snippet, its
    lines commented), then the current file's ``Path:`` line; "" without snippets."""
    if not snippets:
        return ""
    open_, close = _comment_style(language)
    tail = f" {close}" if close else ""

    def line(s: str) -> str:
        return f"{open_} {s}{tail}".rstrip() + "\n" if s else f"{open_}{tail}\n"

    out = []
    for p, text in by_file(snippets):
        out.append(line(f"Path: {p}"))
        out.extend(line(ln) for ln in text.split("\n"))
        out.append(line(""))
    if path:
        out.append(line(f"Path: {path}"))
    return "".join(out)


def repo_block(snippets: tuple[Snippet, ...], repo: str, path: str) -> str:
    """Qwen2.5-Coder's repository format up to the current file (FIM tokens follow):
    ``<|repo_name|>repo``, ``<|file_sep|>path`` and text per snippet, then
    ``<|file_sep|>`` and the current file's path; "" without snippets."""
    if not snippets:
        return ""
    parts = [f"<|repo_name|>{repo or 'repo'}\n"]
    parts.extend(f"<|file_sep|>{p}\n{text}\n" for p, text in by_file(snippets))
    parts.append(f"<|file_sep|>{path or 'untitled'}\n")
    return "".join(parts)


def input_extra(snippets: tuple[Snippet, ...]) -> list[dict[str, str]]:
    """llama-server ``/infill`` ``input_extra`` items: ``{"filename", "text"}``."""
    return [{"filename": p, "text": text + "\n"} for p, text in by_file(snippets)]


def chat_section(snippets: tuple[Snippet, ...]) -> str:
    """A short "Other files:" section for a chat prompt; "" without snippets."""
    if not snippets:
        return ""
    return "Other files:\n\n" + "".join(f"{p}:\n{text}\n\n" for p, text in by_file(snippets))
