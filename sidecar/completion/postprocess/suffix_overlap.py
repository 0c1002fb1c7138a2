"""A text rule, suffix overlap: never return text that already follows the cursor.

Rule: when the rest of the cursor line starts with the whole suggestion, the suggestion
is empty; otherwise the longest ending of the suggestion's last line that equals a start
of the rest of the cursor line is dropped: punctuation and brackets of any length, word
characters only from 4 characters up (a one-character ``1`` before ``1)`` is chance).

Source: a model completing ``print(|)`` writes ``a, b)``, and accepting it gave
``print(a, b))``.

Examples, with ``)`` after the cursor: ``a, b)`` → ``a, b``; ``)`` → ``""``;
``compute_total(items)`` before ``total(items)`` → ``compute_``; ``x = 1`` before ``1)``
→ unchanged.
"""

from __future__ import annotations


def strip_suffix_overlap(text: str, line_suffix: str) -> str:
    """Remove the part of ``text`` that the cursor line already has after the cursor.

    If ``line_suffix`` starts with all of ``text``, the result is ``""``. Otherwise the
    longest ending of ``text``'s last line that equals a start of ``line_suffix`` is
    dropped (punctuation of any length, word characters from 4 characters up).
    """
    if not text:
        return ""
    tail = line_suffix.rstrip()
    if not tail:
        return text
    if tail.startswith(text):
        return ""
    last = text.rsplit("\n", 1)[-1]
    for k in range(min(len(last), len(tail)), 0, -1):
        overlap = tail[:k]
        # Closing brackets, quotes and punctuation overlap by design; a short overlap of
        # word characters ("1" before "1)") is more likely chance, so it needs 4+ chars.
        if last.endswith(overlap) and (k >= 4 or not any(c.isalnum() for c in overlap)):
            kept = text[: len(text) - k]
            return kept.rstrip() if "\n" in kept else kept
    return text
