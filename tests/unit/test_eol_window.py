"""The end-of-line suffix window (ContextBudget.cut): at a finished line end in a
document nobody is typing in, the suffix is up to 256 tokens; while typing, and away
from a finished line end, it is the budget's window."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from sidecar.completion import tokens
from sidecar.completion.context_budget import EOL_SUFFIX_TOKENS, ContextBudget
from sidecar.config import Settings
from sidecar.metrics import Metrics

LINES = [f"    total_{i} = compute_value(items[{i}], weight={i})\n" for i in range(120)]
TEXT = "def f(items):\n" + "".join(LINES)


def budget(suffix_tokens=256):
    # A cloud backend with a 64-token suffix budget: the windows are the settings'.
    settings = dataclasses.replace(Settings(), suffix_tokens=suffix_tokens)
    target = SimpleNamespace(provider="openai", name="x", model="m", engine=None)
    typed: set[str] = set()  # documents being typed in (the scheduler's cadence, in the product)
    b = ContextBudget(lambda: settings, lambda: target, Metrics(), typing=lambda uri: uri in typed)
    b.windows = lambda: (512, 64)  # what the latency budget chose
    b.typed = typed.add  # the test's keystroke
    return b


def at_line_end(n):
    return len("def f(items):\n") + sum(len(x) for x in LINES[:n]) + len(LINES[n]) - 1


def test_eol_suffix_only_at_a_new_place():
    b = budget()
    off = at_line_end(10)  # after "...weight=10)"
    cold = b.cut(TEXT, off, "python", uri="file:///a.py")
    assert tokens.count(cold.suffix) > 128
    b.typed("file:///a.py")
    typing = b.cut(TEXT, off, "python", uri="file:///a.py")
    assert tokens.count(typing.suffix) <= 64
    spec = b.cut(TEXT, off, "python")  # a speculation: typing
    assert spec.suffix == typing.suffix


def test_not_mid_line_and_capped_by_the_setting():
    b = budget()
    mid = b.cut(TEXT, at_line_end(10) - 5, "python", uri="file:///b.py")
    assert tokens.count(mid.suffix) <= 64
    capped = budget(suffix_tokens=96).cut(TEXT, at_line_end(10), "python", uri="file:///c.py")
    assert 64 < tokens.count(capped.suffix) <= 96 < EOL_SUFFIX_TOKENS
