"""What a cross-file snippet is, how many tokens of them a prompt may carry, and their
part of the cache key.

- :class:`Snippet`: lines of another open document (``select.py`` chooses them,
  ``prompts/snippets.py`` renders them in each wire format).
- :func:`budget`: ``crossfile_tokens`` cl100k tokens, 256 for a local backend and 512
  for a cloud one by default, 0 disables.
- :func:`digest`: what the snippets add to a prompt, for ``CacheKey.extra``.

See docs/architecture.md ("What the model sees").
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

LOCAL_TOKENS = 256
CLOUD_TOKENS = 512


def budget(setting: int | None, local: bool) -> int:
    """The snippet budget in cl100k tokens: ``crossfile_tokens`` when set (0 disables),
    else ``LOCAL_TOKENS`` for a local backend and ``CLOUD_TOKENS`` for a cloud one."""
    if setting is not None:
        return max(0, setting)
    return LOCAL_TOKENS if local else CLOUD_TOKENS


@dataclass(frozen=True)
class Snippet:
    """Lines of another open document. ``path`` is relative to the workspace root (the
    file name outside it); ``text`` has ``\\n`` line breaks and no trailing one; ``line``
    is the 0-based line of its first line; ``kind`` is ``"edit"`` or ``"definition"``."""

    path: str
    text: str
    line: int
    kind: str


def digest(snippets: tuple[Snippet, ...], repo: str = "", path: str = "") -> str:
    """A hex digest of what the snippets add to a prompt ("" without snippets), for the
    cache key."""
    if not snippets:
        return ""
    h = hashlib.sha256()
    for part in (repo, path, *(f"{s.path}\x00{s.line}\x00{s.text}" for s in snippets)):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]
