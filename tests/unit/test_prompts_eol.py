"""The line-break lift (sidecar/completion/prompts/eol.py): which cursor lines get it."""

from __future__ import annotations

import pytest

from sidecar.completion.context import build_context
from sidecar.completion.prompts.eol import line_break_lift


def ctx_at_end_of(line: str, after: str = "\nnext()\n"):
    text = "import os\n" + line + after
    return build_context(text, len("import os\n" + line), "python", 1024, 256)


@pytest.mark.parametrize(
    "line",
    [
        "    time.sleep(wait)",
        "x = [1, 2]",
        "};",
        "int main(void) {",
        "def f(x):",
        "#include <string.h>",
        "    let v: Vec<u8>",
    ],
)
def test_a_finished_line_gets_the_line_break(line):
    assert line_break_lift(ctx_at_end_of(line), "template") == "\n"


@pytest.mark.parametrize(
    "line", ["    total = su", "x = a +", "foo(a,", "    ", "", "if a ->", "x = y >", "std::", "done();  "]
)
def test_a_line_that_may_go_on_does_not(line):
    assert line_break_lift(ctx_at_end_of(line), "template") == ""


def test_text_after_the_cursor_or_a_chat_strategy_does_not():
    text = "import os\nfoo(x)\n"
    mid = build_context(text, len("import os\nfoo("), "python", 1024, 256)
    assert line_break_lift(mid, "template") == ""
    assert line_break_lift(ctx_at_end_of("foo(x)"), "chat") == ""


def test_a_suffix_cut_short_ends_after_its_last_blank_line_or_complete_line():
    from sidecar.completion.context import snap_suffix

    assert snap_suffix(")\n    int eof;\n};\n\nstruct reader *reader_open(co") == ")\n    int eof;\n};\n"
    assert snap_suffix(")\n    a = 1\n    b = 2\n    c = fo") == ")\n    a = 1\n    b = 2\n"
    assert snap_suffix(")\n    a = fo") == ")\n    a = fo"  # only the cursor line is whole: kept
    assert snap_suffix("x = 1)") == "x = 1)"  # the cursor's line is never cut


def test_a_whole_suffix_is_not_snapped():
    text = "def f():\n    return x\n\n\ndef g():\n    pass"
    ctx = build_context(text, len("def f():\n    return "), "python", 1024, 256)
    assert ctx.suffix == "x\n\n\ndef g():\n    pass"
