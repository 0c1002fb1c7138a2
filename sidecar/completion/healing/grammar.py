"""The llama.cpp GBNF grammar that forces a constrained output to start with the heal.

A grammar llama.cpp cannot parse makes llama-cpp-python's server fail the request and
can take the process down, which is why :func:`gbnf_literal` escapes everything but
ASCII letters, digits, ``_`` and space.

Cost (measured with the shipped SmolLM2-135M on 2 CPU cores, 20 prompts, temperature
0): llama-cpp-python applies a grammar to the whole 49k-token vocabulary at every step,
about +9 ms per generated token (13 -> 22 ms) and +5 ms to the first token, for as long
as the stream runs (hence ``phases.py``). llama-server samples through llama.cpp's
common sampler, which checks the grammar against the sampled token first and pays the
full pass only when that token is rejected (its documented design; not measured here, no
llama-server on the test machine). See docs/architecture.md.
"""

from __future__ import annotations


def gbnf_literal(text: str) -> str:
    """``text`` as a llama.cpp GBNF string literal, quotes included. Only ASCII letters,
    digits, ``_`` and space go in as they are; everything else is escaped (``\\t``,
    ``\\n``, ``\\r``, ``\\xHH``, ``\\uHHHH``, ``\\UHHHHHHHH`` by code point), so quotes,
    backslashes and non-ASCII text cannot break the grammar."""
    out = ['"']
    for ch in text:
        o = ord(ch)
        if ch == " " or ch == "_" or ("0" <= ch <= "9") or ("a" <= ch <= "z") or ("A" <= ch <= "Z"):
            out.append(ch)
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x80:
            out.append(f"\\x{o:02X}")
        elif o < 0x10000:
            out.append(f"\\u{o:04X}")
        else:
            out.append(f"\\U{o:08X}")
    out.append('"')
    return "".join(out)


def grammar_for(heal: str) -> str:
    """A GBNF grammar (llama.cpp syntax, rule ``root``) for output that starts with
    ``heal`` and goes on with anything: ``.`` is llama.cpp's any-character element,
    line breaks included."""
    return f"root ::= {gbnf_literal(heal)} .*\n"


def choices_grammar(choices: tuple[str, ...]) -> str:
    """A GBNF grammar for output that starts with one of ``choices`` (whole identifiers)
    followed by the end or by a character that cannot continue an identifier, then
    anything."""
    alts = " | ".join(gbnf_literal(c) for c in choices)
    return f"root ::= ({alts}) ([^a-zA-Z0-9_$] .*)?\n"
