"""The confidence cut, after the stop rules: a multi-line suggestion ends where the
model grows unsure.

A small model often gets the first line of a block right and then guesses; the lines it
guesses are shown anyway and make the whole suggestion wrong to take. Where the backend
sends the log-probability of each token it wrote (the managed engine, OpenAI-compatible
engines that return ``logprobs``), the answer ends before the first line after its first
line with text whose least sure token has a natural log-probability below the threshold
(``confidence_cut_logprob``; 0 turns the rule off). The first line with text is never
cut (that is the confidence gate's call, :mod:`sidecar.completion.gate`), and without
log-probabilities nothing is cut.

Which token belongs to which line: the tokens' texts, joined, are the model's text; a
token belongs to the line in which its first character that is not a line break
stands, and tokens of only whitespace count for no line (indentation is not a guess the
user sees). The filter's text and the tokens' text may differ at their start (the line
break a prompt ended with is given back, token healing drops the repeated word start),
never in their number of line breaks after that, so lines are matched from the end.

Tuned on the real-code corpus's tuning half (docs/benchmarks.md, "The confidence cut").
"""

from __future__ import annotations

from collections.abc import Sequence


def token_lines(tokens: Sequence[tuple[str, float]]) -> list[list[float]]:
    """The log-probabilities of ``tokens`` (``(text, natural log-probability)``) grouped
    by the line of the tokens' joined text they belong to (module doc)."""
    lines: list[list[float]] = [[]]
    for text, lp in tokens:
        i = 0
        while i < len(text) and text[i] == "\n":
            lines.append([])
            i += 1
        if text[i:].strip():
            lines[-1].append(lp)
        lines.extend([] for _ in range(text[i:].count("\n")))
    return lines


def cut_at(lines: Sequence[str], tokens: Sequence[tuple[str, float]], threshold: float, raw_lines: int) -> int | None:
    """How many of the complete ``lines`` to keep: the index of the first line after the
    first line with text whose least sure token is below ``threshold``, or None. ``raw_lines``
    is the number of lines of the whole text so far (complete ones and the growing last
    one), to match the tokens' lines from the end."""
    per = token_lines(tokens)
    offset = len(per) - raw_lines
    seen = False
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if seen:
            j = i + offset
            if 0 <= j < len(per) and per[j] and min(per[j]) < threshold:
                return i
        seen = True
    return None
