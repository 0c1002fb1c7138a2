"""The model writes the receiver again: ``Validate.`` then ``Validate.notNull(x);``.

After a member access (the text before the cursor ends in ``Name.``) a small code model
sometimes starts its answer with the same ``Name.``, as if the cursor stood before it.
Shown as it is, the line would read ``Validate.Validate.notNull(x);``: wrong, and the
member that follows is often the right one. Seen on the cross-file benchmark's tuning
half (``Validate.`` in commons-lang3, ``immer_.`` in immer) with Qwen2.5-Coder-0.5B; see
docs/benchmarks.md, "Cross-file quality".

Rule: where the cursor line's text before the cursor ends in an identifier and a dot
(``Name.``, the identifier by Unicode word characters), an answer that starts with that
same ``Name.`` has it stripped; the rest is the suggestion. The doubled form may be real
code (``response.data.data``): when ``Name.Name`` already stands anywhere in the window
(prefix or suffix), nothing is stripped.

Streaming (:class:`ReceiverStutter`): the first characters are held back only while they
are still the start of ``Name.`` (at most its length); at the first character that
departs from it everything held goes on unchanged, and at the stream's end
:meth:`ReceiverStutter.flush` gives back what is still held.
"""

from __future__ import annotations

import re

_RECEIVER = re.compile(r"(?<!\w)([^\W\d]\w*)\.$")


def receiver_before_cursor(line_prefix: str, prefix: str, suffix: str) -> str:
    """``"Name."`` when ``line_prefix`` (the cursor line's text before the cursor) ends
    in an identifier and a dot (the last one of a chain: ``self.data.`` gives
    ``"data."``) and ``Name.Name`` (as whole names) stands in neither ``prefix`` nor
    ``suffix`` (the prompt's windows); else ``""``."""
    m = _RECEIVER.search(line_prefix)
    if m is None:
        return ""
    name = m.group(1)
    doubled = re.compile(rf"(?<!\w){re.escape(name)}\.{re.escape(name)}(?!\w)")
    if doubled.search(prefix) or doubled.search(suffix):
        return ""
    return name + "."


class ReceiverStutter:
    """Strips a repeated receiver from the start of a streamed answer (module doc).

    ``receiver`` is :func:`receiver_before_cursor`'s result (``""``: every delta passes
    unchanged). :attr:`stripped` is True once the receiver was removed."""

    def __init__(self, receiver: str) -> None:
        self.receiver = receiver
        self._held = ""
        self._decided = not receiver
        self.stripped = False

    def feed(self, delta: str) -> str:
        """The text to pass on for ``delta`` (``""`` while undecided)."""
        if self._decided:
            return delta
        held = self._held + delta
        n = len(self.receiver)
        if held[:n] == self.receiver[: len(held[:n])] and len(held) < n:
            self._held = held  # still the receiver's start: wait
            return ""
        self._decided = True
        self._held = ""
        if held.startswith(self.receiver):
            self.stripped = True
            return held[n:]
        return held

    def flush(self) -> str:
        """At the stream's end: what is still held back (a start of the receiver that
        never completed), to pass on unchanged."""
        self._decided = True
        held, self._held = self._held, ""
        return held
