"""Splitting output text into token-like pieces and planning what a request returns."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Every character is whitespace, a word character or neither, so the pieces always
# join back to the input text.
_PIECE = re.compile(r"\s+|\w+|[^\w\s]")


def split_tokens(text: str) -> list[str]:
    """Split ``text`` into token-like pieces (runs of whitespace, words, single symbols).

    ``"".join(split_tokens(t)) == t`` holds for every string.
    """
    return _PIECE.findall(text)


def count_tokens(text: str) -> int:
    """Number of pieces :func:`split_tokens` makes of ``text``."""
    return len(split_tokens(text))


@dataclass(frozen=True)
class OutputPlan:
    """What one request will stream.

    Attributes:
        pieces: the token pieces to send, in order.
        finish_reason: ``"stop"`` (natural end or stop sequence) or ``"length"`` (max_tokens).
    """

    pieces: list[str]
    finish_reason: str

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def plan_output(text: str, stop: Iterable[str] = (), max_tokens: int | None = None) -> OutputPlan:
    """Apply stop sequences, then ``max_tokens`` (counted in pieces), to a full output text.

    The text is cut just before the earliest occurrence of any non-empty stop sequence
    (the stop sequence itself is not returned). If more than ``max_tokens`` pieces remain,
    only the first ``max_tokens`` are kept and the finish reason is ``"length"``.
    """
    cut = -1
    for seq in stop:
        if not seq:
            continue
        pos = text.find(seq)
        if pos != -1 and (cut == -1 or pos < cut):
            cut = pos
    if cut != -1:
        text = text[:cut]
    pieces = split_tokens(text)
    if max_tokens is not None and len(pieces) > max_tokens:
        return OutputPlan(pieces[:max_tokens], "length")
    return OutputPlan(pieces, "stop")
