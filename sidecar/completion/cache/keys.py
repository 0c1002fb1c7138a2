"""Cache keys: what determines a completion, hashed.

A key covers the backend (kind and base URL), the model, the language, the prompt's
prefix window and its suffix window (the exact text the model saw, line breaks
normalized), and a digest of the other files' snippets the prompt carried, if any. It
is not the whole document, so an edit outside the windows keeps entries
valid; it is not the prefix alone, so a changed suffix or a deleted line above the
cursor (inside the window) is a different key and misses.

Typing-through uses a look-back: after the user typed ``k`` characters, the entry stored
for the prefix window without those characters is found by hashing ``prefix[:-k]``, and
its completion answers when it starts with the typed characters. Up to ``LOOKBACK_CHARS``
characters, on the cursor's line only, are tried; each try is one SHA-256 of the windows
(about 5 µs for 4 KB) and one dict lookup, or one ``IN (...)`` query on SQLite for all
of them together.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

LOOKBACK_CHARS = 64


@dataclass(frozen=True)
class CacheKey:
    """The parts of a key. ``backend`` names kind and base URL; never a secret."""

    backend: str
    model: str
    language: str
    prefix: str
    suffix: str
    #: Whatever else the model sees (a digest of other files' snippets, crossfile/);
    #: "" adds nothing, so keys without it hash as before.
    extra: str = ""

    def digest(self, drop: int = 0) -> str:
        """Hex SHA-256 of the key with the last ``drop`` characters of the prefix removed."""
        prefix = self.prefix[: len(self.prefix) - drop] if drop else self.prefix
        h = hashlib.sha256()
        parts = (self.backend, self.model, self.language, prefix, self.suffix) + ((self.extra,) if self.extra else ())
        for part in parts:
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()

    def lookback_limit(self, limit: int = LOOKBACK_CHARS) -> int:
        """How many typed characters to look back over: at most ``limit``, on the cursor's line."""
        line_start = self.prefix.rfind("\n") + 1
        return min(limit, len(self.prefix) - line_start)

    def lookback(self, limit: int = LOOKBACK_CHARS) -> list[tuple[int, str]]:
        """``[(k, digest)]`` for ``k`` = 0 .. ``lookback_limit`` typed characters."""
        return [(k, self.digest(k)) for k in range(self.lookback_limit(limit) + 1)]
