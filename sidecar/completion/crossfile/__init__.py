"""Cross-file context: snippets of the user's other open documents for the prompt.

What goes in (``CrossFileContext.select``, ``select.py``), under a budget of
``crossfile_tokens`` cl100k tokens (``budget()``, ``snippet.py``: 256 for a local
backend, 512 for a cloud one, 0 disables):

1. **Recent edits** of other open documents: the lines around each of the last
   ``MAX_REGIONS`` edited places of a document (``EDIT_CONTEXT_LINES`` above and below),
   documents edited most recently first. Edits are recorded from ``didChange``
   (``record_change``, ``edits.py``); a full-document change records nothing (no place
   is known).
2. **Definitions** of identifiers used near the cursor, found by a regular expression
   over the other open documents (``index.py``: ``def name``, ``function name``,
   ``class Name``, ``fn``/``func``/``struct``/``interface``/``type``, top-level
   ``const``/``let``/``var``, and ``type name(...)`` definitions in C-family
   languages): the definition line and its indented body, at most
   ``MAX_DEFINITION_LINES`` lines. Identifiers closest to the cursor come first.

Candidates that overlap or do not fit, ``MAX_SNIPPETS``, the order of the block, what is
never included (the current document, closed, binary or huge documents, minified
lines) and **prefix stability** (the block comes first in the prompt, so it is chosen
again only when another document changed, the cursor moved to another
``ALIGN_LINES``-line block, or a name defined elsewhere appeared near the cursor): see
``select.py``. ``digest()`` (``snippet.py``) is the snippets' part of the cache key.

Formats (``prompts/snippets.py``, since ``prompts/`` owns every wire format): Qwen2.5-Coder
with the ``template`` strategy gets its repository format (``<|repo_name|>``,
``<|file_sep|>`` per file, the current file last); llama-server ``/infill`` gets
``input_extra``; the ``chat`` strategy gets a short "Other files:" section; every other
strategy gets a comment block in the current file's language (a ``Path:`` line per
snippet, then the current file's path) before the prefix. This package never imports
``prompts/`` (which imports it), and those renderers (``comment_block``, ``repo_block``,
``input_extra``, ``chat_section``, ``by_file``) are not reachable from here: import them
from ``sidecar.completion.prompts.snippets``.

See docs/architecture.md ("What the model sees").
"""

from __future__ import annotations

from .edits import MAX_REGIONS, MERGE_LINES, EditLog
from .index import MAX_DEFINITION_LINES, NEAR_AFTER_CHARS, NEAR_BEFORE_CHARS, identifiers_near
from .select import (
    ALIGN_LINES,
    EDIT_CONTEXT_LINES,
    MAX_DOC_CHARS,
    MAX_LINE_CHARS,
    MAX_SNIPPETS,
    MIN_SNIPPET_TOKENS,
    CrossFileContext,
)
from .snippet import CLOUD_TOKENS, LOCAL_TOKENS, Snippet, budget, digest

__all__ = [
    "ALIGN_LINES",
    "CLOUD_TOKENS",
    "EDIT_CONTEXT_LINES",
    "LOCAL_TOKENS",
    "MAX_DEFINITION_LINES",
    "MAX_DOC_CHARS",
    "MAX_LINE_CHARS",
    "MAX_REGIONS",
    "MAX_SNIPPETS",
    "MERGE_LINES",
    "MIN_SNIPPET_TOKENS",
    "NEAR_AFTER_CHARS",
    "NEAR_BEFORE_CHARS",
    "CrossFileContext",
    "EditLog",
    "Snippet",
    "budget",
    "digest",
    "identifiers_near",
]
