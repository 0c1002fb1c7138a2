"""Speculative prefetch: the next suggestion is ready before the user asks.

Two speculations, both assuming the user takes what is shown:

- **after a suggestion is shown** (its stream has ended): the completion that follows
  accepting it, at the document prefix plus the suggestion;
- **after an accepted suggestion ends a line**: the next line, at the prefix plus the
  accepted text, a line break and the indentation the next line will likely have.

A prefetch is an ordinary upstream stream anchored at the speculated document text: a
later request that agrees with it joins it (or, once it has ended, is answered from it),
and its text goes to the cache under the key the real request will compute (the windows
are cut by the same function), so the user's next request is a hit.

Budget, in order of precedence:
- prefetch is off when ``prefetch_enabled`` is false;
- it runs at lower priority than user requests: at most ``prefetch_max_concurrent``
  (default 1) at once, never in the last free upstream slot, and a user stream that
  finds no free slot cancels running prefetches first;
- it is cancelled as soon as a request shows the user diverged from the speculated text;
- it respects a rolling per-minute token budget (``prefetch_tokens_per_min``; by default
  6,000 for cloud backends, about four full prompts, and 200,000 for a local engine),
  reserving the prompt's estimated tokens (cl100k) plus ``max_tokens`` before it starts.
"""

from __future__ import annotations

import time
from collections import deque

CLOUD_TOKENS_PER_MIN = 6_000
LOCAL_TOKENS_PER_MIN = 200_000


class TokenBudget:
    """A rolling 60-second budget of tokens (prompt plus generated)."""

    def __init__(self, per_min: int) -> None:
        self.per_min = per_min
        self._spent: deque[tuple[float, int]] = deque()

    def used(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        while self._spent and now - self._spent[0][0] > 60.0:
            self._spent.popleft()
        return sum(n for _, n in self._spent)

    def try_reserve(self, tokens: int) -> bool:
        """Reserve ``tokens`` if they fit in the last minute's budget."""
        now = time.monotonic()
        if self.used(now) + tokens > self.per_min:
            return False
        self._spent.append((now, tokens))
        return True


def next_line_indent(line: str) -> str:
    """Indentation for the line after ``line``: the same, one level deeper after a line
    that opens a block (``:``, ``{``, ``(``, ``[``)."""
    indent = line[: len(line) - len(line.lstrip())]
    if line.rstrip().endswith((":", "{", "(", "[")):
        unit = "\t" if indent.startswith("\t") else "    "
        indent += unit
    return indent
