"""Cross-file context: which snippets of other open documents go into a prompt, in which
format, and that the block stays the same while the user types (completion/crossfile.py).
The documents are tests/support/crossfile_texts.py; the prompt over real stdio is
tests/e2e/test_crossfile_e2e.py."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from sidecar.completion import crossfile, tokens
from sidecar.completion.cache import CacheKey
from sidecar.completion.context import build_context
from sidecar.completion.crossfile import CrossFileContext, EditLog, Snippet, identifiers_near
from sidecar.completion.prompts import build_request, snippets
from support.crossfile_texts import A_TEXT, B_TEXT, C_TEXT, A, B, C


def doc(text, language="python", version=1):
    return SimpleNamespace(source=text, language_id=language, version=version)


def change(line, text="x", end_line=None):
    end = line if end_line is None else end_line
    return {"range": {"start": {"line": line, "character": 0}, "end": {"line": end, "character": 0}}, "text": text}


def cursor_of(text, marker="    \n"):
    off = text.index(marker) + len(marker) - 1
    return off, text.count("\n", 0, off)


@pytest.fixture
def docs():
    return {A: doc(A_TEXT), B: doc(B_TEXT)}


def select(cf, docs, uri=A, budget=256, text=None, offset=None, line=None):
    text = docs[uri].source if text is None else text
    if offset is None:
        offset, line = cursor_of(text)
    return cf.select(uri, line, text[:offset], text[offset:], budget)


# --------------------------------------------------------------------------- choice table
def test_definition_of_a_name_used_near_the_cursor_comes_from_the_other_document(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    got = select(cf, docs)
    assert [(s.path, s.kind, s.line) for s in got] == [("geometry.py", "definition", 40)]
    assert got[0].text == 'def compute_area(w, h):\n    """Area of a w x h rectangle."""\n    return w * h'


def test_recent_edits_come_first_and_are_lines_around_the_edit(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(B, [change(10)])
    got = select(cf, docs, budget=125)  # room for the edit region only (109 tokens as commented)
    assert [s.kind for s in got] == ["edit"]
    assert got[0].line == 10 - crossfile.EDIT_CONTEXT_LINES
    assert "# filler line 10" in got[0].text and got[0].text.count("\n") == 2 * crossfile.EDIT_CONTEXT_LINES
    both = select(CrossFileContext(lambda: docs, lambda: "/w"), docs)
    assert [s.kind for s in both] == ["definition"]  # a fresh record has no edits


@pytest.mark.parametrize("limit", [0, 30, 60, 100, 256, 1000])
def test_budget_is_respected(docs, limit):
    docs[C] = doc(C_TEXT, "typescript")
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(B, [change(5)])
    cf.record_change(B, [change(25)])
    cf.record_change(C, [change(1)])
    text = A_TEXT.replace("    \n", "    name = formatName(a, b) + MAX_USERS\n    \n")
    got = select(cf, docs, budget=limit, text=text)
    cost = sum(tokens.count(s.text) + tokens.count(s.path) + 4 for s in got)
    assert cost <= limit
    # What is sent: the comment block, markers and the current file's Path line included.
    for language in ("python", "css"):
        assert tokens.count(snippets.comment_block(got, language, "app.py")) <= max(limit, 0) or not got
    if limit == 0:
        assert got == ()
    if limit >= 1000:
        assert {s.kind for s in got} == {"edit", "definition"}
        assert any(s.path == "util.ts" for s in got)


def test_the_current_document_is_never_included(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(A, [change(5)])  # edits and a definition (compute_local) of its own
    text = A_TEXT.replace("    \n", "    compute_local()\n    \n")
    got = select(cf, docs, text=text)
    assert got and all(s.path != "app.py" for s in got)
    docs.pop(B)
    assert select(cf, docs, text=text) == ()


def test_closed_documents_are_never_included(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(B, [change(10)])
    assert select(cf, docs)
    docs.pop(B)  # the client closed it: the store forgets it, then didClose arrives
    cf.closed(B)
    assert select(cf, docs) == ()
    assert cf.edits.regions(B) == []


def test_binary_and_huge_documents_are_skipped(docs):
    docs[B] = doc("def compute_area(w, h):\x00\x01\x02 binary")
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    assert select(cf, docs) == ()
    docs[B] = doc("def compute_area(w, h):\n    return 1\n" + "#" * crossfile.MAX_DOC_CHARS)
    assert select(cf, docs) == ()


def test_snippets_with_control_characters_are_skipped(docs):
    # A NUL past the first 8 KiB (the binary check reads only those) must not reach a prompt.
    docs[B] = doc("".join(f"# filler {i}\n" for i in range(1000)) + "def compute_area(w, h):\n    return 'a\x00b'\n")
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    assert all("\x00" not in s.text for s in select(cf, docs))


def test_minified_lines_are_skipped(docs):
    docs[B] = doc("def compute_area(w, h): return " + "w*h+" * 200 + "0\n")
    assert select(CrossFileContext(lambda: docs), docs) == ()


def test_the_same_block_gives_the_same_snippets_across_keystrokes(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(B, [change(10)])
    text = A_TEXT
    offset, line = cursor_of(text)
    first = cf.select(A, line, text[:offset], text[offset:], 256)
    computed = cf.recomputed
    for ch in "result = total + 1":  # typing, as didChange would, in the same 16-line block
        text = text[:offset] + ch + text[offset:]
        offset += 1
        cf.record_change(A, [change(line, ch)])  # the current document's own edits do not count
        again = cf.select(A, line, text[:offset], text[offset:], 256)
        assert again is first
    assert cf.recomputed == computed
    # Another block: the choice is made again (and, nothing else having changed, equal).
    far = cf.select(A, line + crossfile.ALIGN_LINES, text[:offset], text[offset:], 256)
    assert cf.recomputed == computed + 1 and far == first


def test_a_new_name_defined_elsewhere_adds_its_definition_once(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    text = A_TEXT.replace("compute_area(3, 4)", "3 * 4")
    offset, line = cursor_of(text)
    assert cf.select(A, line, text[:offset], text[offset:], 256) == ()
    typed = "Shape"
    text = text[:offset] + typed + "(" + text[offset:]
    offset += len(typed) + 1
    got = cf.select(A, line, text[:offset], text[offset:], 256)
    assert [s.text.split("\n")[0] for s in got] == ["class Shape:"]
    n = cf.recomputed
    assert cf.select(A, line, text[:offset] + ")", text[offset:], 256) is got and cf.recomputed == n


def test_a_change_in_another_document_recomputes(docs):
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    first = select(cf, docs)
    docs[B] = doc(B_TEXT.replace("return w * h", "return h * w"), version=2)
    cf.record_change(B, [change(42)])
    second = select(cf, docs)
    assert second != first and any("return h * w" in s.text for s in second)


def test_snippets_are_ordered_by_path_then_line(docs):
    docs[C] = doc(C_TEXT, "typescript")
    docs["file:///w/aaa.py"] = doc("def helper_one():\n    pass\n")
    cf = CrossFileContext(lambda: docs, lambda: "/w")
    cf.record_change(C, [change(0)])
    cf.record_change(B, [change(30)])
    text = A_TEXT.replace("    \n", "    helper_one()\n    \n")
    got = select(cf, docs, text=text, budget=1000)
    assert [(s.path, s.line) for s in got] == sorted((s.path, s.line) for s in got)
    assert {s.path for s in got} == {"aaa.py", "geometry.py", "util.ts"}


def test_definitions_in_other_languages():
    docs = {
        A: doc("x = formatName(1)\ny = parse_header(p)\nz = Point(1, 2)\nw = MAX_USERS\n"),
        C: doc(C_TEXT, "typescript"),
        "file:///w/parse.c": doc(
            "#include <stdio.h>\n\nstatic int parse_header(const char *p) {\n  return 0;\n}\n", "c"
        ),
        "file:///w/point.rs": doc("pub struct Point {\n    x: i32,\n}\n", "rust"),
    }
    cf = CrossFileContext(lambda: docs)
    text = docs[A].source
    got = cf.select(A, 3, text, "", 1000)
    heads = {s.text.split("\n")[0] for s in got}
    assert heads == {
        "export function formatName(first: string, last: string): string {",
        "export const MAX_USERS = 100;",
        "static int parse_header(const char *p) {",
        "pub struct Point {",
    }


def test_identifiers_near_the_cursor_closest_first_and_not_the_word_being_typed():
    assert identifiers_near("total = compute_area(width, hei", ") + offset") == [
        "width",
        "compute_area",
        "total",
        "offset",
    ]


def test_edit_log_moves_regions_with_inserted_lines_and_keeps_three():
    log = EditLog()
    log.record(B, [change(50)])
    log.record(B, [change(10, "a\nb\nc\n")])  # three lines inserted above line 50
    assert log.regions(B) == [13, 53]
    log.record(B, [change(14)])  # close to 13: refreshes that region
    assert log.regions(B) == [14, 53]
    log.record(B, [change(100)])
    log.record(B, [change(200)])
    assert log.regions(B) == [200, 100, 14]
    log.record(B, [{"text": "whole document"}])  # full sync: no place known
    assert log.regions(B) == [200, 100, 14]


def test_paths_are_relative_to_the_root_or_file_names():
    cf = CrossFileContext(lambda: {}, lambda: "/home/me/proj")
    assert cf.path_of("file:///home/me/proj/src/a%20b.py") == "src/a b.py"
    assert cf.path_of("file:///etc/hosts") == "hosts"
    assert cf.path_of("untitled:Untitled-1") == "Untitled-1"
    assert cf.repo_name() == "proj"


def test_budget_defaults():
    assert crossfile.budget(None, local=True) == 256
    assert crossfile.budget(None, local=False) == 512
    assert crossfile.budget(0, local=True) == 0
    assert crossfile.budget(100, local=False) == 100


# --------------------------------------------------------------------------- formats
SNIPS = (
    Snippet("geometry.py", "def compute_area(w, h):\n    return w * h", 40, "definition"),
    Snippet("geometry.py", "class Shape:\n    sides = 4", 44, "definition"),
    Snippet("util.ts", "export const MAX_USERS = 100;", 3, "edit"),
)


def ctx_with(language="python", snippets=SNIPS):
    text = "def main():\n    total = \n"
    ctx = build_context(text, text.index("= ") + 2, language, 1024, 256)
    return dataclasses.replace(ctx, snippets=snippets, path="src/app.py", repo="proj")


COMMENTS = (
    "# Path: geometry.py\n# def compute_area(w, h):\n#     return w * h\n# ...\n# class Shape:\n#     sides = 4\n#\n"
    "# Path: util.ts\n# export const MAX_USERS = 100;\n#\n# Path: src/app.py\n"
)


def test_prefix_strategy_gets_a_comment_block_before_the_prefix():
    ctx = ctx_with()
    req = build_request(ctx, "prefix", api="llama-cpp-python", model="smollm2", max_tokens=16, temperature=0)
    assert req.body["prompt"] == COMMENTS + ctx.prefix


def test_suffix_strategy_gets_the_comment_block_in_the_prompt():
    ctx = ctx_with()
    req = build_request(
        ctx, "suffix", api="siliconflow", model="Qwen/Qwen2.5-Coder-7B-Instruct", max_tokens=16, temperature=0
    )
    assert req.body["prompt"] == COMMENTS + ctx.prefix and req.body["suffix"] == ctx.suffix


def test_qwen_template_gets_the_repository_format():
    ctx = ctx_with()
    req = build_request(ctx, "template", api="openai", model="qwen2.5-coder-1.5b", max_tokens=16, temperature=0)
    assert req.body["prompt"] == (
        "<|repo_name|>proj\n"
        "<|file_sep|>geometry.py\ndef compute_area(w, h):\n    return w * h\n...\nclass Shape:\n    sides = 4\n"
        "<|file_sep|>util.ts\nexport const MAX_USERS = 100;\n"
        "<|file_sep|>src/app.py\n"
        f"<|fim_prefix|>{ctx.prefix}<|fim_suffix|>{ctx.suffix}<|fim_middle|>"
    )


def test_other_templates_get_comments_inside_the_fim_prefix():
    ctx = ctx_with(language="javascript")
    req = build_request(ctx, "template", api="openai", model="starcoder2-3b", max_tokens=16, temperature=0)
    assert req.body["prompt"].startswith("<fim_prefix>// Path: geometry.py\n// def compute_area(w, h):\n")
    assert req.body["prompt"].endswith(f"// Path: src/app.py\n{ctx.prefix}<fim_suffix>{ctx.suffix}<fim_middle>")


def test_chat_gets_an_other_files_section():
    ctx = ctx_with()
    req = build_request(ctx, "chat", api="siliconflow", model="deepseek-ai/DeepSeek-V3", max_tokens=16, temperature=0)
    user = req.body["messages"][1]["content"]
    assert user.startswith("Other files:\n\ngeometry.py:\ndef compute_area(w, h):\n")
    assert "util.ts:\nexport const MAX_USERS = 100;\n\nLanguage: python\n\n" in user
    assert req.body["prefix"] == ctx.prefix  # SiliconFlow's own fields stay the windows


def test_infill_gets_input_extra():
    ctx = ctx_with()
    req = build_request(ctx, "infill", api="llama-server", model="m", max_tokens=16, temperature=0)
    assert req.body["input_extra"] == [
        {
            "filename": "geometry.py",
            "text": "def compute_area(w, h):\n    return w * h\n...\nclass Shape:\n    sides = 4\n",
        },
        {"filename": "util.ts", "text": "export const MAX_USERS = 100;\n"},
    ]
    assert req.body["input_prefix"] == ctx.prefix


def test_ollama_prompt_gets_the_comment_block():
    ctx = ctx_with()
    req = build_request(ctx, "suffix", api="ollama", model="qwen2.5-coder:1.5b", max_tokens=16, temperature=0)
    assert req.body["prompt"] == COMMENTS + ctx.prefix


@pytest.mark.parametrize(
    "language,first",
    [
        ("go", "// Path: geometry.py"),
        ("sql", "-- Path: geometry.py"),
        ("html", "<!-- Path: geometry.py -->"),
        ("css", "/* Path: geometry.py */"),
    ],
)
def test_comment_syntax_follows_the_language(language, first):
    assert snippets.comment_block(SNIPS, language, "x").split("\n")[0] == first


def test_no_snippets_change_nothing():
    ctx = ctx_with(snippets=())
    for strategy, api, model in (
        ("prefix", "llama-cpp-python", "smollm2"),
        ("template", "openai", "qwen2.5-coder"),
        ("suffix", "siliconflow", "Qwen/Qwen2.5-Coder-7B-Instruct"),
    ):
        req = build_request(ctx, strategy, api=api, model=model, max_tokens=16, temperature=0)
        assert req.body["prompt"].startswith(ctx.prefix) or req.body["prompt"].startswith("<|fim_prefix|>" + ctx.prefix)


def test_snippets_are_part_of_the_cache_key():
    plain = ctx_with(snippets=())
    with_snips = ctx_with()

    def key(c):
        return CacheKey("b", "m", c.language, c.prefix, c.suffix, extra=crossfile.digest(c.snippets, c.repo, c.path))

    assert key(plain).digest() == CacheKey("b", "m", plain.language, plain.prefix, plain.suffix).digest()
    assert key(with_snips).digest() != key(plain).digest()
    other = dataclasses.replace(with_snips, snippets=SNIPS[:2])
    assert key(other).digest() != key(with_snips).digest()
    assert key(with_snips).lookback()[1][1] != key(plain).lookback()[1][1]


def test_blocks_are_the_prefix_windows_alignment():
    from sidecar.completion import context

    assert crossfile.ALIGN_LINES == context.ALIGN_LINES
