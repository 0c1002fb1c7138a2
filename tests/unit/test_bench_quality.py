"""``sidecar bench quality``: hole making and scoring. The real runs against the embedded
engine are tests/e2e/test_bench_quality_e2e.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.tools.bench.quality import naive_cut
from sidecar.tools.bench.quality_holes import (KINDS, closer_run, is_code_line, make_hole, make_holes, mid_line_columns,
                                         mid_word_columns)
from sidecar.tools.bench.quality_metrics import (common_prefix_len, first_line, format_table, is_duplicate, is_late,
                                           is_stub, score, summarize)

ROOT = Path(__file__).resolve().parents[2]

C_TEXT = "\n".join([
    "#include <unistd.h>",
    "",
    "void reader_close(struct reader *in)",
    "{",
    "    if (in == NULL) {",
    "        return;",
    "    }",
    "    close(in->fd);",
    "    free(in->buf);",
    "}",
    "",
])

PY_TEXT = "\n".join([
    "import time",
    "",
    "",
    "class Bucket:",
    "    def refill(self, now):",
    "        elapsed = max(0.0, now - self.updated)",
    "        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)",
    "        self.updated = now  # the last refill",
    "",
])


# -- holes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, line, column, middle, truth, doc_line, suffix_start", [
    # the example: the cursor after "clo", the rest of the line is the hole
    ("mid_word", 7, 7, "se(in->fd);", "se(in->fd);", "    clo", "\n    free(in->buf);"),
    # the closer run ");" stays after the cursor on the line
    ("mid_line", 7, 10, "in->fd", "in->fd", "    close();", ");\n    free"),
    # the next line is removed; the truth is that line, the middle starts with a break
    ("end_of_line", 7, 18, "\n    free(in->buf);", "free(in->buf);", "    close(in->fd);", "\n}\n"),
    # the line is emptied to its indentation; the cursor is after the indentation
    ("blank_line", 8, 4, "free(in->buf);", "free(in->buf);", "    ", "\n}\n"),
])
def test_make_hole(kind, line, column, middle, truth, doc_line, suffix_start):
    h = make_hole(kind, "x.c", C_TEXT, "c", line, column)
    assert h.middle == middle
    assert h.truth_line == truth
    assert h.document.split("\n")[line] == doc_line
    assert h.suffix.startswith(suffix_start)
    assert h.prefix == C_TEXT[: len(h.prefix)]  # the text before the cursor is the file's own
    assert h.offset == len(h.prefix) and h.document[: h.offset].split("\n")[-1] == doc_line[:column]
    assert h.character == column  # ASCII: UTF-16 units == code points


def test_make_hole_utf16_character():
    text = "a = 1\nb = 2\nc = 3\nname = '𝄞é' + suffix_value\n"
    cols = mid_word_columns(text.split("\n")[3])
    col = cols[-1]  # inside "suffix_value"
    h = make_hole("mid_word", "u.py", text, "python", 3, col)
    assert h.character == col + 1  # the clef is two UTF-16 units
    assert h.middle == text.split("\n")[3][col:]


@pytest.mark.parametrize("line, language, expected", [
    ("    close(in->fd);", "c", True),
    ("#include <stdio.h>", "c", True),
    ("    x = 1  # note", "python", False),
    ("    // a comment", "c", False),
    ("     * doc line", "c", False),
    ('    """Docstring."""', "python", False),
    ("    }", "c", False),  # fewer than 4 non-blank characters
    ("", "python", False),
])
def test_is_code_line(line, language, expected):
    assert is_code_line(line, language) is expected


@pytest.mark.parametrize("line, run", [
    ("    foo(a, b);", ");"),
    ("def f(x):", "):"),
    ("    return x", ""),
    ("});", ""),  # the whole line: no mid_line hole
    ("    x = [1, 2]  ", "]"),
])
def test_closer_run(line, run):
    assert closer_run(line) == run or (run == "" and closer_run(line).strip() == line.strip())


@pytest.mark.parametrize("line, expected", [
    ("    foo(a, bc);", [8, 11]),  # after "(" and after ", "
    ("    foo(a, b);", [8]),  # after ", " the middle "b" is too short
    ("    x = compute(a, b)", [8, 16]),  # after "= " and "("
    ("    return x", []),  # no closer run
    ("    f(a);", []),  # a middle of one character is too short
])
def test_mid_line_columns(line, expected):
    assert mid_line_columns(line) == expected


def test_mid_word_columns():
    # "close" (5 chars): cursor after 2..4 chars; "in"/"fd" are too short
    assert mid_word_columns("    close(in->fd);") == [6, 7, 8]


def test_make_holes_is_deterministic_and_spread():
    files = [("a.c", C_TEXT, "c"), ("b.py", PY_TEXT, "python")]
    first = make_holes(files, 3, seed=7)
    again = make_holes(files, 3, seed=7)
    assert [h.id for h in first] == [h.id for h in again]
    assert {h.kind for h in first} == set(KINDS)
    for kind in KINDS:
        hs = [h for h in first if h.kind == kind]
        assert 1 <= len(hs) <= 3
        assert len({(h.file, h.line) for h in hs}) == len(hs)  # one hole per line and kind
    mids = [h for h in first if h.kind == "mid_word"]
    assert {h.file for h in mids} == {"a.c", "b.py"}  # round-robin over the files
    others = {tuple(h.id for h in make_holes(files, 3, seed=s)) for s in range(6)}
    assert len(others) > 1  # the seed moves the holes
    # comment lines are never holes: the trailing comment makes line 7 of PY_TEXT unusable
    assert all(h.line != 7 for h in make_holes([("b.py", PY_TEXT, "python")], 50, seed=1))


def test_make_holes_none_from_prose():
    assert make_holes([("n.py", "# one\n# two\n# three\n# four\n# five\n", "python")], 5, seed=0) == []


# -- metrics ----------------------------------------------------------------------------------

def _hole(kind="mid_word", line=7, column=7):
    return make_hole(kind, "x.c", C_TEXT, "c", line, column)


@pytest.mark.parametrize("answer, hole_args, exact, accepted, empty, duplicate", [
    ("se(in->fd);", ("mid_word", 7, 7), True, 11, False, False),
    ("se(in->fd);  ", ("mid_word", 7, 7), True, 11, False, False),  # stripped compare
    ("se(in);", ("mid_word", 7, 7), False, 5, False, False),
    ("", ("mid_word", 7, 7), False, 0, True, False),
    ("   ", ("mid_word", 7, 7), False, 0, True, False),
    ("se(in->fd);\n    free(x);", ("mid_word", 7, 7), True, 11, False, False),  # only the first line counts
    ("free(in->buf);", ("mid_word", 7, 7), False, 0, False, True),  # repeats the next line
    ("\n    free(in->buf);", ("end_of_line", 7, 18), True, 19, False, False),
    ("\n    }", ("end_of_line", 7, 18), False, 5, False, True),  # "}" is the next line
    ("\n}", ("end_of_line", 7, 18), False, 1, False, True),  # the first non-blank suffix line is "}"
    ("in->fd", ("mid_line", 7, 10), True, 6, False, False),
    (")", ("mid_line", 7, 10), False, 0, False, True),  # trailing ";" is ignored: ")" repeats ");"
    ("x)", ("mid_line", 7, 10), False, 0, False, False),
    (");", ("mid_line", 7, 10), False, 0, False, True),  # repeats the rest of the cursor line
    ("free(in->buf) ;", ("blank_line", 8, 4), False, 13, False, False),
])
def test_score(answer, hole_args, exact, accepted, empty, duplicate):
    s = score(answer, _hole(*hole_args))
    assert (s["exact"], s["accepted_chars"], s["empty"], s["duplicate"]) == (exact, accepted, empty, duplicate)


@pytest.mark.parametrize("text, expected", [
    ("abc\ndef", "abc"), ("\nabc\ndef", "abc"), ("\r\nabc", "abc"), ("", ""), ("\n\nx", ""),
])
def test_first_line(text, expected):
    assert first_line(text) == expected


@pytest.mark.parametrize("a, b, n", [("abc", "abd", 2), ("", "x", 0), ("same", "same", 4), ("ab", "abc", 2)])
def test_common_prefix_len(a, b, n):
    assert common_prefix_len(a, b) == n


@pytest.mark.parametrize("first, final, stub", [
    ("foo(", "foo(a, b)", True),
    ("", "foo", False),  # answered empty at the deadline: "late", not a stub
    ("foo", "foo", False),
    ("foo", "bar", False),  # not a prefix: a different suggestion, not a stub
    ("", "", False),
])
def test_is_stub(first, final, stub):
    assert is_stub(first, final) is stub
    assert is_late(first, final) is (not first and bool(final))


def test_duplicate_ignores_whitespace_and_trailing_punctuation():
    h = _hole("mid_word", 7, 7)
    assert is_duplicate("free( in->buf )", h)
    assert not is_duplicate("free(in->buf2);", h)


@pytest.mark.parametrize("raw, final, expected", [
    ("abc", False, None),  # more text may follow
    ("abc", True, "abc"),
    ("abc  \ndef", False, "abc"),
    ("\n    x = 1\n", False, "\n    x = 1"),  # one leading break is kept with the next line
    ("\n    x = 1", False, None),
    ("\n    x = 1", True, "\n    x = 1"),
    ("\n\nfoo", False, ""),  # a blank line after the break: nothing
])
def test_naive_cut(raw, final, expected):
    assert naive_cut(raw, final) == expected


def test_summarize_and_table():
    holes = [_hole("mid_word", 7, 7), _hole("end_of_line", 7, 18)]
    recs = [
        {"hole": holes[0].id, "kind": "mid_word", "latency_ms": 100.0, "final_ms": 300.0, "stub": True,
         "first": "se(", "final": "se(in->fd);", "score": score("se(in->fd);", holes[0])},
        {"hole": holes[1].id, "kind": "end_of_line", "latency_ms": 300.0, "final_ms": 300.0, "stub": False,
         "first": "", "final": "", "error": "no answer", "score": score("", holes[1])},
        {"hole": holes[1].id, "kind": "end_of_line", "latency_ms": 900.0, "stub": False, "late": True,
         "first": "", "final": "", "reference_final": "\n    x", "score": score("", holes[1])},
    ]
    s = summarize(recs)
    assert s["holes"] == 3 and s["answered"] == 1 and s["errors"] == 1
    assert s["exact_first_line_pct"] == 33.3
    assert s["accepted_chars_per_hole"] == 3.67
    assert s["empty_pct"] == 66.7
    assert s["latency_p50_ms"] == 300.0 and s["final_p50_ms"] == 300.0
    # of 2 holes with a final text (own or the reference's): 1 stub, 1 late
    assert s["stub_pct"] == 50.0 and s["late_pct"] == 50.0
    assert s["by_kind"]["mid_word"]["exact_first_line_pct"] == 100.0
    table = format_table({"sidecar": s, "naive": summarize(recs[:1])})
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "sidecar", "naive"]
    assert any(ln.startswith("exact first line % (mid_word)") for ln in lines)
    assert "-" in next(ln for ln in lines if ln.startswith("exact first line % (end_of_line)"))


def test_cli_dispatch_keeps_the_latency_bench():
    from sidecar.tools.bench import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["quality", "--help"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert (ROOT / "fixtures" / "quality").is_dir()
