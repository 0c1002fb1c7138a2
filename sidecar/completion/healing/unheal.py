"""Strip the heal from the start of a streamed output (:class:`Unhealer`).

The model re-writes the heal; it is stripped from the output before anything else sees
it, so the text the editor gets stays relative to the cursor. Constrained output goes
through the same :class:`Unhealer`, so an engine that ignored the grammar (an old
server, a proxy) gives no suggestion rather than text misplaced by the heal's length.
See docs/architecture.md.
"""

from __future__ import annotations


class Unhealer:
    """Strips the heal from the start of a streamed output.

    :meth:`feed` takes the model's deltas (text) in order and returns the text after the
    heal: ``""`` while the heal is still arriving, then everything that follows it. If
    the output departs from the heal, :attr:`mismatch` becomes True and every later
    delta returns ``""``. With an empty heal every delta passes through unchanged.
    """

    def __init__(self, heal: str) -> None:
        self.heal = heal
        self._buf = ""
        self.matched = not heal
        self.mismatch = False

    @property
    def pending(self) -> bool:
        """True while part of the heal has not arrived yet (and nothing contradicts it)."""
        return not self.matched and not self.mismatch

    def feed(self, delta: str) -> str:
        """The part of ``delta`` that follows the heal (see the class doc)."""
        if self.matched:
            return delta
        if self.mismatch:
            return ""
        buf = self._buf + delta
        n = min(len(buf), len(self.heal))
        if buf[:n] != self.heal[:n]:
            self.mismatch = True
            self._buf = ""
            return ""
        if len(buf) < len(self.heal):
            self._buf = buf
            return ""
        self.matched = True
        self._buf = ""
        return buf[len(self.heal) :]
