"""One table of cases per postprocessing rule (sidecar/completion/postprocess/, one module
per rule). ``|`` in a case's document is the cursor; results go through ``clean`` so that
each rule is seen in the pipeline's order, and through the stream filter where the rule
decides when a stream stops."""

from __future__ import annotations

import random

import pytest

from sidecar.completion.context import build_context
from sidecar.completion.postprocess import StreamFilter, clean, indentation, strip_suffix_overlap
from sidecar.completion.postprocess.common import core, following_lines
from sidecar.completion.postprocess.pipeline import find_end
from sidecar.completion.prompts import stop_sequences


def ctx_at(doc: str, language: str = "python"):
    off = doc.index("|")
    return build_context(doc[:off] + doc[off + 1 :], off, language, 512, 512)


def run(doc: str, raw: str, language: str = "python") -> str:
    return clean(raw, ctx_at(doc, language))


def stream(doc: str, raw: str, step: int = 3):
    """(final text, characters fed when the filter said stop or None, texts shown)."""
    f = StreamFilter(ctx_at(doc))
    shown, stopped = [], None
    for i in range(0, len(raw), step):
        if f.feed(raw[i : i + step]):
            stopped = i + step
            shown.append(f.text())
            break
        shown.append(f.text())
    return f.text(), stopped, shown


# ------------------------------------------------------------------ 1. line policy
LINE_POLICY = [
    # (document, raw, expected)
    ("x = compute(|", "a)\nmore()\n", "a)"),  # one line
    ("print(|)\nnext()\n", "\nmore()", ""),  # mid-line: first line only
    ("def f(r):\n    result = r * r|\n", "\n    return result\n    print(result)\n", "\n    return result"),
    ("x = 1|\n", "\n\nprint(x)\n", "\nprint(x)"),  # leading blank line skipped
    ("def main():|\n", "\n\n    a = 1\n    return a\n\nmain()\n", "\n    a = 1\n    return a"),
    ("import os|\n", "\n\n\ndef main():\n", "\ndef main():"),  # PEP 8's two blank lines
    ("import os|\n", "\n\n\n\n\n\ndef main():\n", ""),  # too many: given up
    ("def f():\n    |\n", "a = 1\n    b = 2\n\n    c = 3\n", "a = 1\n    b = 2"),  # ends at a blank line
]


@pytest.mark.parametrize("doc,raw,expected", LINE_POLICY)
def test_line_policy(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


def test_line_policy_stops_the_stream():
    _, stopped, _ = stream("x = 1|\n", "\n\nprint(x)\n" + "y = 2\n" * 50)
    assert stopped is not None and stopped < 20
    _, stopped, _ = stream("import os|\n", "\n" * 200)
    assert stopped is not None and stopped <= 6


STOPS = [
    ("print(|)\n", ["\n"]),  # mid-line
    ("x = 1|\n", []),  # end of a non-blank line: the filter stops, not "\n\n"
    ("def f():\n    |\n", ["\n\n"]),  # blank cursor line
]


@pytest.mark.parametrize("doc,expected", STOPS)
def test_stop_sequences(doc, expected):
    assert stop_sequences(ctx_at(doc)) == expected


# ------------------------------------------------------------------ 2. whitespace at the join
JOIN = [
    ("def f(x):\n    return |\n", " x + 1", "x + 1"),  # double space dropped
    ("x = |\n", "\t[1]", "[1]"),
    ("x =|\n", "1", "1"),  # no space invented
    ("x =|\n", " 1", " 1"),  # the model's own space kept
    ("foo.|\n", "bar()", "bar()"),
    ("def f():\n    |\n", " y = 2", "y = 2"),  # narrower than a unit on a blank line
    ("def f():\n    |\n", "        y = 2", "    y = 2"),  # whole units: indentation's business
]


@pytest.mark.parametrize("doc,raw,expected", JOIN)
def test_join_whitespace(doc, raw, expected):
    assert run(doc, raw) == expected


# ------------------------------------------------------------------ 3. repetition
REPETITION = [
    ("x = 0\nwhile x:\n    |\n", "x = x + 1\n" + "    x = x + 1\n" * 13, "x = x + 1"),
    ("def f():\n    |\n", "a = g()\n    b = h(a)\n    a = g()\n    c = 1\n", "a = g()\n    b = h(a)"),
    ("x = x + |\n", "1\nx = x + 1\n", "1"),  # the first line counts as the whole line
    (
        "def f(a, b):\n    |\n",
        "if a:\n        return 1\n    if b:\n        return 1\n    return 0",
        "if a:\n        return 1\n    if b:\n        return 1\n    return 0",
    ),  # structural lines may repeat
    ("def f():\n    |\n", "return x\n    return x\n    return x\n", "return x"),  # adjacent copies always count
    ("x = 1|\n", "\nx = 1\n", "\nx = 1"),  # the user's own line is not the answer's
]


@pytest.mark.parametrize("doc,raw,expected", REPETITION)
def test_repetition(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


def test_repetition_stops_the_stream_at_the_second_copy():
    raw = "x = x + 1\n" + "    x = x + 1\n" * 13
    text, stopped, shown = stream("x = 0\nwhile x:\n    |\n", raw)
    assert text == "x = x + 1" and stopped is not None and stopped <= 27
    assert all(s in ("", "x", "x =", "x = x", "x = x +", "x = x + 1") for s in shown)


# ------------------------------------------------------------------ 4 and 6a. lines after the cursor
SUFFIX = [
    ("def f(x):\n    |\n    return y\n", "y = x + 1\n    return y\n" + "z" * 50, "y = x + 1"),
    ("def g(a, b):\n    |\n    foo(a, b)\n", "x = 1\n    foo(a, b)):\n", "x = 1"),  # up to punctuation
    ("def g(a, b):\n    |\n    foo(a, b)\n", "x = 1\n    foo(a, b) + 1\n", "x = 1\n    foo(a, b) + 1"),
    ("def g():\n    |\n    a()\n    b = 2\n    c = 3\n", "x = 1\n    c = 3\n", "x = 1"),  # the third line too
    ("def g():\n    |\n    a()\n    b()\n    c()\n    d = 4\n", "x = 1\n    d = 4", "x = 1\n    d = 4"),  # not a 4th
    ("def m(v):\n    |\n    return total / len(v)\n", "total = sum(v)\n    return total\n", "total = sum(v)"),
    ("def m(v):\n    |\n    return totals\n", "t = 1\n    return total\n", "t = 1\n    return total"),  # not a word end
    ("func f() {\n\tfor {|\n\t}\n}\n", "\n\t\tx++\n\t}\n", "\n\t\tx++"),  # the closer, exactly
    ("func f() {\n\tfor {|\n\t}\n}\n", "\n\t\tif x {\n\t\t\ty()\n\t\t}\n", "\n\t\tif x {\n\t\t\ty()\n\t\t}"),
    ("def f():\n    |\n    return y\n", "return y\n", ""),  # a whole first line is compared
    ("def f():\n    x = |\n    return y\n", "return y\n", "return y"),  # the rest of a line is not
]


@pytest.mark.parametrize("doc,raw,expected", SUFFIX)
def test_suffix_repeat(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


def test_suffix_repeat_never_shows_a_partial_copy():
    doc = "def g(a, b):\n    |\n    foo(a, b)\n"
    text, stopped, shown = stream(doc, "x = 1\n    foo(a, b)):\n    return x\n", step=1)
    assert text == "x = 1" and stopped is not None
    assert all(s in ("", "x", "x =", "x = 1") for s in shown), shown


# ------------------------------------------------------------------ 6b. a first line copied from further down
CTOR = (
    "class A:\n    def __init__(self, name, size):\n        |\n        self.items = []\n"
    "        self.count = 0\n        self.size = size\n        self.name = name\n"
)
SUFFIX_COPY = [
    # the whole first line stands four lines below, in the same block: nothing is shown
    (CTOR, "self.name = name\n", ""),
    (CTOR, "self.name = name\n        self.other = 1\n", ""),
    # the same line typed partly (mid-word): the whole line it makes is the copy
    (CTOR.replace("        |", "        self.na|"), "me = name\n", ""),
    # not a copy: a line that is not below
    (CTOR, "self.label = name\n", "self.label = name"),
    # a short line is written many times in one block: kept
    (
        "def f(xs):\n    for x in xs:\n        |\n        a()\n        b()\n        c()\n        break\n",
        "break\n",
        "break",
    ),
    # the scan stops where the block closes: a line after it is not compared
    (
        "def f():\n    if a:\n        |\n        b()\n    c()\n    d()\n    self.name = name\n",
        "self.name = name\n",
        "self.name = name",
    ),
    # only the first line with text is judged; a later copy ends the answer there (rule 4)
    (
        "def g():\n    |\n    a()\n    b()\n    c()\n    total = compute(x)\n",
        "y = 1\n    total = compute(x)\n",
        "y = 1\n    total = compute(x)",
    ),
    # at the end of a line, the first line with text comes after the break
    ("def f(a):\n    x = a|\n    y = 2\n    z = 3\n    w = 4\n    result = a * 2\n", "\n    result = a * 2\n", ""),
]


@pytest.mark.parametrize("doc,raw,expected", SUFFIX_COPY)
def test_suffix_copy(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


def test_suffix_copy_is_held_back_while_streaming_and_short_starts_are_shown():
    doc = "def __init__(self, name):\n    |\n    count = 0\n    items = []\n    total = 1\n    self.name = name\n"
    text, stopped, shown = stream(doc, "self.name = name\n", step=1)
    assert text == "" and stopped is not None
    # held from the 6th character of its core on; shorter starts are shown meanwhile
    assert "self." in shown and all(len(s) < 6 for s in shown), shown


def test_following_lines_and_core():
    ctx = ctx_at("def f():\n    |\n\n    a(b)\n    }\n    c()\n    d()\n")
    assert [f.text for f in following_lines(ctx)] == ["a(b)", "}", "c()"]
    assert core("    foo(a, b)):") == core("foo(a, b)") == "foo(a, b"


# ------------------------------------------------------------------ 5. indentation
DETECT = [
    ("def f():\n\tif x:\n\t\treturn 1\n", ("tab", 4)),
    ("def f():\n    if x:\n        return 1\n", ("space", 4)),
    ("function f() {\n  if (x) {\n    return 1;\n  }\n}\n", ("space", 2)),
    ("/**\n * doc\n */\nx = 1\n", None),
    ("x = 1\ny = 2\n", None),
]


@pytest.mark.parametrize("text,expected", DETECT)
def test_indentation_detect(text, expected):
    style = indentation.detect(text)
    assert (style and (style.kind, style.width)) == expected


INDENT = [
    ("def total(xs):\n\tr = 0\n\t|\n", "    for x in xs:\n        r += x\n\n", "for x in xs:\n\t\tr += x"),
    ("def total(xs):\n\tr = 0\n\tfor x in xs:|\n", "\n        r += x\n\n", "\n\t\tr += x"),
    (
        "function f(a) {\n  if (a) {\n    g();\n  }\n  for (;;) {|\n",
        "\n      h();\n      k();\n\n",
        "\n    h();\n    k();",
    ),  # 4-space unit in a 2-space file
    ("class A:\n    def f(self):|\n", "\n\t\treturn 1\n\n", "\n        return 1"),  # tabs in a space file
    ("def f():\n    x = [\n        1,\n    ]\n    |\n", "\n    y = 2\n\n", "y = 2"),  # break on a blank line
    ("def f():\n    if x:\n        |\n", "\n    return 1\n", ""),  # dedented: ends the block
    ("def f():\n    x = foo(a,\n            b)\n    |\n", "y = 1\n\n", "y = 1"),  # nothing to change
    ("def f():\n    return g(|\n", "a,\n          b)\n", "a,"),  # one line: untouched
    # Tabs then spaces from the model in a tab file (found by a fresh tester): re-indented.
    (
        "def f(items):\n\ttotal = 0\n\t|\n\treturn total\n",
        "for i in items:\n\t    total += i\n\n",
        "for i in items:\n\t\ttotal += i",
    ),
    (
        "def f(items):\n\ttotal = 0\n\t|\n\treturn total\n",
        "if i:\n\t\tfor j in i:\n\t\t    total += j\n\n",
        "if i:\n\t\tfor j in i:\n\t\t\ttotal += j",
    ),
]


@pytest.mark.parametrize("doc,raw,expected", INDENT)
def test_indentation(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


def test_indentation_of_a_shown_line_does_not_change_later():
    doc = "function f(a) {\n  if (a) {\n    g();\n  }\n  for (;;) {|\n"
    raw = "\n      h();\n      if (k) {\n          m();\n      }\n\n"
    final, _, shown = stream(doc, raw, step=1)
    for s in shown:
        lines = s.split("\n")
        assert final.split("\n")[: len(lines) - 1] == lines[:-1]


# ------------------------------------------------------------------ 6b. trailing whitespace
TRAILING = [
    ("x = |\n", "[1, 2]   \n  \n\n", "[1, 2]"),
    ("def f():\n    |\n", "a = 1  \n    b = 2\t\n", "a = 1\n    b = 2"),
]


@pytest.mark.parametrize("doc,raw,expected", TRAILING)
def test_trailing_whitespace(doc, raw, expected):
    assert run(doc, raw) == expected


# ------------------------------------------------------------------ 6c. suffix overlap
OVERLAP = [
    ("foo)", "foo)", ""),
    ("x = 1", "1)", "x = 1"),  # a one-character word overlap is chance
    ('name"]', '"]', "name"),
    ("compute_total(items)", "total(items)", "compute_"),
    ("a, b)", ")", "a, b"),
    ("a\n    b)", ")", "a\n    b"),
    ("abc", "", "abc"),
]


@pytest.mark.parametrize("text,line_suffix,expected", OVERLAP)
def test_suffix_overlap(text, line_suffix, expected):
    assert strip_suffix_overlap(text, line_suffix) == expected


# ------------------------------------------------------------------ 7. markdown fences
FENCE = [
    ("def f():\n    |\n", "return 1\n```\n\nThis function returns 1.", "python", "return 1"),
    ("x = 1|\n", "\n```\nmore", "python", ""),
    ("# Title\n\n|\n", "```python\nx = 1\n```\n", "markdown", "```python\nx = 1\n```"),
    ('def f():\n    """Example:\n\n    ```\n    |\n', "x = 1\n    ```\n", "python", "x = 1\n    ```"),
]


@pytest.mark.parametrize("doc,raw,language,expected", FENCE)
def test_fence(doc, raw, language, expected):
    assert run(doc, raw, language) == expected


# ------------------------------------------------------------------ 8. end of the block
BLOCK_END = [
    ("x = 0\nwhile x:\n    |\n", "\n\n# Output:\n# 1\n# 2\n", ""),
    ("def f():\n    if x:|\n", "\n        y = 1\nprint(y)\n", "\n        y = 1"),
    ("def fib(n):\n    if n < 2:\n        return n|\n", "\n    return fib(n - 1)\n", "\n    return fib(n - 1)"),
    ("func main() {\n\tx := 1\n\t|\n}\n", "y := 2\n}\n\nfunc other() {\n", "y := 2"),
]


@pytest.mark.parametrize("doc,raw,expected", BLOCK_END)
def test_block_end(doc, raw, expected):
    assert run(doc, raw) == expected
    assert stream(doc, raw)[0] == expected


# ------------------------------------------------------------------ the pipeline's promise
def test_a_shown_partial_line_is_never_removed_later():
    """Random answers against random suffix lines: whatever the text shows while a line
    grows either stays in the final text or was never shown (the holds of rules 3, 4)."""
    rng = random.Random(7)
    alphabet = ["foo", "(", ")", "a", ",", " ", "b", ":", ";", "x", "=", "1", "}"]
    for _ in range(400):
        nxt = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        earlier = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))).strip() or "q"
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
        doc = "def f():\n    |\n    " + nxt + "\n"
        raw = earlier + "\n    " + line + "\n"
        ctx = ctx_at(doc)
        final = clean(raw, ctx)
        for k in range(len(raw)):
            shown = clean(raw[:k], ctx)
            s, f = shown.split("\n"), final.split("\n")
            assert len(s) <= len(f) and s[:-1] == f[: len(s) - 1] and f[len(s) - 1].startswith(s[-1]), (
                doc,
                raw,
                k,
                shown,
                final,
            )


def test_find_end_judges_only_complete_lines():
    ctx = ctx_at("def f(x):\n    |\n    return y\n")
    assert find_end(["a = 1", "    retur"], ctx, multiline=True, open_last=False) is None
    assert find_end(["a = 1", "    retur"], ctx, multiline=True, open_last=True) == 1  # held back
    assert find_end(["a = 1", "    return y"], ctx, multiline=True, open_last=False) == 1


# ------------------------------------------------------------------ 7. the confidence cut
def feed_tokens(doc: str, tokens: list[tuple[str, float]], cut: float | None, lead: str = "") -> str:
    """Feed ``tokens`` one at a time as a stream does: log-probabilities first, then the
    text (``lead`` is text the filter gets before the tokens, as the line-break lift)."""
    f = StreamFilter(ctx_at(doc), cut)
    if lead:
        f.feed(lead)
    for text, lp in tokens:
        f.token_logprobs.append((text, lp))
        if f.feed(text):
            break
    return f.text()


BLOCK = [
    ("x = 1", -0.1),
    ("\n", -0.1),
    ("    ", -0.01),
    ("y = 2", -0.2),
    ("\n", -0.1),
    ("    ", -0.01),
    ("zz", -5.0),
    (" = 3", -0.3),
    ("\n", -0.1),
    ("    ", -0.01),
    ("w = 4", -0.1),
    ("\n", -0.1),
]


def test_confidence_cut_ends_a_block_before_its_first_unsure_line():
    doc = "def f():\n    |\n"
    assert feed_tokens(doc, BLOCK, -2.0) == "x = 1\n    y = 2"
    assert feed_tokens(doc, BLOCK, None) == "x = 1\n    y = 2\n    zz = 3\n    w = 4"
    assert feed_tokens(doc, BLOCK, -6.0) == "x = 1\n    y = 2\n    zz = 3\n    w = 4"  # nothing that unsure


def test_confidence_cut_never_cuts_the_first_line_and_skips_indentation_tokens():
    doc = "def f():\n    |\n"
    unsure_first = [("q", -9.0), ("q = 1", -0.1), ("\n", -0.1), ("    ", -12.0), ("y = 2", -0.1), ("\n", -0.1)]
    assert feed_tokens(doc, unsure_first, -2.0) == "qq = 1\n    y = 2"


def test_confidence_cut_matches_lines_from_the_end_when_the_text_has_a_lifted_break():
    # At the end of a finished line the prompt ends with the break, which the filter gets
    # back first; the tokens do not have it.
    doc = "def f(a):\n    x = a|\n"
    toks = [("    ", -0.1), ("y = 2", -0.1), ("\n", -0.1), ("    ", -0.1), ("zz = 3", -4.0), ("\n", -0.1)]
    assert feed_tokens(doc, toks, -2.0, lead="\n") == "\n    y = 2"
