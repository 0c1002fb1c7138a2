"""``python -m devtools.bench crossfile``: the whole-tree extraction, the definition finders,
hole making and scoring, on small projects written into tmp_path (no model, no network).
The real runs against the engine are the bench's own (docs/benchmarks.md, "Cross-file quality")."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from devtools.bench import corpus, crossfile
from devtools.bench.crossfile import (
    ProjectHoles,
    ask_sidecar,
    format_table,
    pick_packages,
    project_label,
    score,
    summarize,
    wait_index,
)
from devtools.bench.crossfile_holes import (
    CrossHole,
    file_candidates,
    load_project,
    make_hole,
    project_counts,
    select_holes,
)


def _write(root: Path, files: dict[str, str]) -> list[Path]:
    paths = []
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths


def _project(tmp_path: Path, language: str, files: dict[str, str], name: str = "demo"):
    root = tmp_path / name
    return load_project(name, "tune", language, root, _write(root, files))


PY_FILES = {
    "pkg/__init__.py": "from .models import Widget\n",
    "pkg/models.py": (
        "LIMIT_COUNT = 10\n"
        "\n"
        "class Widget:\n"
        "    kind_name = 'w'\n"
        "\n"
        "    def __init__(self, label):\n"
        "        self.label_text = label\n"
        "\n"
        "    def render_all(self, depth):\n"
        "        return depth\n"
    ),
    "pkg/other.py": "def render_all(x):\n    return x\n",
    "pkg/views.py": (
        "from .models import Widget\n"
        "import os\n"
        "\n"
        "def show(items, depth=LIMIT_COUNT):\n"
        "    w = Widget('a')\n"
        "    total = 0\n"
        "    for item in items:\n"
        "        total = w.render_all(depth) + item\n"
        "    print(w.label_text)  # label_text again: label_text\n"
        "    w.render_all(1)\n"
        "    os.path.join(w.kind_name, show.__name__)\n"
        "    return dict(items=items, render_all=total)\n"
    ),
}


def _holes_by_name(project, rel):
    f = project.file(rel)
    return {name: (line, col) for line, col, name in file_candidates(project, f)}


def test_python_definitions_and_candidates(tmp_path):
    project = _project(tmp_path, "python", PY_FILES)
    models = project.file("pkg/models.py")
    assert {"LIMIT_COUNT", "Widget", "kind_name", "__init__", "label_text", "render_all"} <= models.definitions
    assert "label" not in models.definitions  # a parameter is no definition
    assert project.definers["render_all"] == ("pkg/models.py", "pkg/other.py")
    views = project.file("pkg/views.py")
    assert views.imports == {"pkg/models.py"}
    assert 0 in views.import_lines and 1 in views.import_lines
    got = _holes_by_name(project, "pkg/views.py")
    # LIMIT_COUNT: first use (a default value); render_all: first use on line 7 only;
    # label_text and kind_name: attributes defined in models.py.
    assert got == {"LIMIT_COUNT": (3, 22), "render_all": (7, 18), "label_text": (8, 12), "kind_name": (10, 19)}
    # Not holes: Widget (on the import line first), items/total/item (bindings, not defined
    # elsewhere), print/dict (standard names), render_all= (a keyword argument), show (F's own).


def test_python_hole_text_truth_and_definer(tmp_path):
    project = _project(tmp_path, "python", PY_FILES)
    f = project.file("pkg/views.py")
    hole = make_hole(project, f, 7, 18, "render_all")
    assert hole.truth == "render_all(depth) + item"
    assert hole.prefix.endswith("        total = w.")
    assert hole.suffix.startswith("\n    print(w.label_text)")
    assert hole.document == f.text.replace("render_all(depth) + item", "", 1)
    assert hole.defined_in == "pkg/models.py"  # imported by F, before other.py's own render_all
    assert hole.definers == ("pkg/models.py", "pkg/other.py")
    assert hole.defined_in_path == str(project.root / "pkg/models.py")
    assert hole.language == "python"
    assert (hole.line, hole.column, hole.character) == (7, 18, 18)
    assert "document" not in hole.describe()


def test_definer_is_the_first_by_path_when_none_is_imported(tmp_path):
    files = {
        "b_defs.py": "def shared_helper():\n    pass\n",
        "a_defs.py": "def shared_helper():\n    pass\n",
        "use.py": "import sys\nx = sys.shared_helper()\n",
    }
    project = _project(tmp_path, "python", files)
    (line, col, name) = file_candidates(project, project.file("use.py"))[0]
    assert make_hole(project, project.file("use.py"), line, col, name).defined_in == "a_defs.py"


def test_import_through_a_package_init_counts_as_importing(tmp_path):
    files = {**PY_FILES, "app.py": "from pkg import Widget\nWidget('x').render_all(2)\n"}
    project = _project(tmp_path, "python", files)
    app = project.file("app.py")
    assert {"pkg/__init__.py", "pkg/models.py"} <= app.imports
    hole = make_hole(project, app, 1, 12, "render_all")
    assert hole.defined_in == "pkg/models.py"


def test_a_name_written_earlier_even_in_a_comment_makes_no_hole(tmp_path):
    files = {
        "defs.py": "def fetch_rows():\n    pass\n",
        "use.py": "# fetch_rows is called below\nimport defs\nrows = defs.fetch_rows()\n",
        "use2.py": "import defs\nrows = defs.fetch_rowsx() + defs.fetch_rows()\n",
    }
    project = _project(tmp_path, "python", files)
    assert file_candidates(project, project.file("use.py")) == []
    # A longer identifier holding the name is no occurrence of it.
    assert file_candidates(project, project.file("use2.py")) == [(1, 33, "fetch_rows")]


def test_an_unparsable_file_gives_no_holes_and_says_why(tmp_path):
    project = _project(tmp_path, "python", {"bad.py": "def (:\n", "ok.py": "def fine_name():\n    pass\n"})
    bad = project.file("bad.py")
    assert bad.error and bad.definitions == frozenset() and bad.uses == ()
    assert project_counts(project)["unparsed"] == 1


JS_FILES = {
    "lib/layer.js": (
        "'use strict';\n"
        "var pathRegexp = require('path-to-regexp');\n"
        "module.exports = Layer;\n"
        "function Layer(path) {\n"
        "  this.regexpKeys = [];\n"
        "}\n"
        "Layer.prototype.handleRequest = function handle(req) {\n"
        "  return req;\n"
        "};\n"
        "exports.makeLayer = function (x) { return x; };\n"
        "class Stack { pushLayer(l) {} }\n"
    ),
    "lib/route.js": (
        "var Layer = require('./layer');\n"
        "function Route(path) {\n"
        "  var layer = Layer(path);\n"
        "  layer.handleRequest(path).pushLayer(layer.regexpKeys);\n"
        "  return Layer.makeLayer(layer);\n"
        "}\n"
        "var pathRegexp = 1;\n"
    ),
}


def test_javascript_definitions_and_holes(tmp_path):
    project = _project(tmp_path, "javascript", JS_FILES)
    layer = project.file("lib/layer.js")
    assert {"Layer", "regexpKeys", "handleRequest", "makeLayer", "Stack", "pushLayer"} <= layer.definitions
    assert "pathRegexp" not in layer.definitions  # a require binding is an import
    assert "exports" not in layer.definitions
    route = project.file("lib/route.js")
    assert route.imports == {"lib/layer.js"} and 0 in route.import_lines
    got = file_candidates(project, route)
    assert [(n, ln) for ln, _c, n in got] == [
        ("handleRequest", 3),
        ("pushLayer", 3),
        ("regexpKeys", 3),
        ("makeLayer", 4),
    ]
    hole = make_hole(project, route, *got[0][:2], got[0][2])
    assert hole.truth == "handleRequest(path).pushLayer(layer.regexpKeys);"
    assert hole.defined_in == "lib/layer.js"


def test_javascript_object_keys_are_no_uses_but_typescript_keys_are(tmp_path):
    js = _project(tmp_path, "javascript", {**JS_FILES, "lib/opts.js": "var o = { handleRequest: 1, makeLayer };\n"})
    assert [n for _l, _c, n in file_candidates(js, js.file("lib/opts.js"))] == ["makeLayer"]  # a shorthand is a use
    ts = _project(tmp_path, "typescript", {**TS_FILES, "src/opts.ts": "const o = { autoFreeze_: true }\n"}, name="t")
    assert [n for _l, _c, n in file_candidates(ts, ts.file("src/opts.ts"))] == ["autoFreeze_"]


TS_FILES = {
    "src/types.ts": (
        "export interface DraftState {\n"
        "  modified_: boolean\n"
        "  finalize(): void\n"
        "}\n"
        "export type Options = { autoFreeze_: boolean }\n"
        "export enum ArchKind { Object, Array }\n"
    ),
    "src/index.ts": "export * from './types'\nexport { helperFn } from './util'\n",
    "src/util.ts": "export function helperFn(a: number): number { return a }\nexport const MAX_DEPTH = 3\n",
    "src/core.ts": (
        "import { DraftState } from './index'\n"
        "export function make(opts: any): DraftState {\n"
        "  const state = { modified_: false, finalize() {} }\n"
        "  if (opts.autoFreeze_) helperFn(MAX_DEPTH)\n"
        "  return state as any\n"
        "}\n"
    ),
}


def test_typescript_definitions_reexports_and_holes(tmp_path):
    project = _project(tmp_path, "typescript", TS_FILES)
    types_ = project.file("src/types.ts")
    assert {"DraftState", "modified_", "finalize", "Options", "autoFreeze_", "ArchKind", "Object", "Array"} <= (
        types_.definitions
    )
    assert project.file("src/index.ts").definitions == frozenset()  # re-exports define nothing
    core = project.file("src/core.ts")
    assert core.imports == {"src/index.ts", "src/types.ts", "src/util.ts"}  # through the re-exports
    got = {n: ln for ln, _c, n in file_candidates(project, core)}
    # An object literal's key is a use (the interface's field); its method definition binds.
    assert got == {"modified_": 2, "autoFreeze_": 3, "helperFn": 3, "MAX_DEPTH": 3}


def test_go_same_package_and_java_imports(tmp_path):
    go = _project(
        tmp_path,
        "go",
        {
            "flag.go": "package p\n\ntype FlagSet struct { parsed bool }\n\nfunc (f *FlagSet) VarP(n string) {}\n",
            "bool.go": 'package p\n\nimport "fmt"\n\nfunc (f *FlagSet) BoolP(n string) {\n\tf.VarP(n)\n\tfmt.Println(f.parsed)\n\tx := len(n)\n\t_ = x\n}\n',
        },
        name="gop",
    )
    got = {n: (ln, c) for ln, c, n in file_candidates(go, go.file("bool.go"))}
    assert got == {"FlagSet": (4, 9), "VarP": (5, 3), "parsed": (6, 15)}
    assert go.file("bool.go").imports == {"flag.go"}
    java = _project(
        tmp_path,
        "java",
        {
            "src/org/x/helper/Validate.java": "package org.x.helper;\npublic final class Validate {\n  public static void notNull(Object o) {}\n  static final int LIMIT_MAX = 3;\n}\n",
            "src/org/x/nodes/Node.java": 'package org.x.nodes;\nimport org.x.helper.Validate;\n@SuppressWarnings(value = "x")\npublic class Node {\n  void walk(Object visitor) {\n    Validate.notNull(visitor);\n    int k = Validate.LIMIT_MAX;\n  }\n}\n',
        },
        name="javap",
    )
    node = java.file("src/org/x/nodes/Node.java")
    assert node.imports == {"src/org/x/helper/Validate.java"}
    got = {n: ln for ln, _c, n in file_candidates(java, node)}
    assert got == {"notNull": 5, "LIMIT_MAX": 6}  # Validate is on the import line first; visitor is a parameter


def test_selection_is_seeded_capped_and_spread(tmp_path):
    files = {"defs.py": "".join(f"def helper_{i:02d}():\n    pass\n" for i in range(20))}
    for k in range(4):
        files[f"use{k}.py"] = "import defs\n" + "".join(f"defs.helper_{i:02d}()\n" for i in range(10))
    project = _project(tmp_path, "python", files)
    holes = select_holes(project, seed=0, per_file=3, per_project=10)
    assert len(holes) == 10
    per_file = {}
    for h in holes:
        per_file[h.rel] = per_file.get(h.rel, 0) + 1
    assert max(per_file.values()) == 3 and len(per_file) == 4
    assert holes == sorted(holes, key=lambda h: (h.rel, h.offset))  # document order
    assert [h.id for h in select_holes(project, seed=0, per_file=3, per_project=10)] == [h.id for h in holes]
    assert [h.id for h in select_holes(project, seed=1, per_file=3, per_project=10)] != [h.id for h in holes]
    assert len(select_holes(project, seed=0, per_file=1, per_project=100)) == 4  # too few: says how many


def _hole(name="render_all", truth="render_all(depth) + item") -> CrossHole:
    return CrossHole(
        id="p:f.py:1:0",
        project="p",
        file="/tmp/p/f.py",
        rel="f.py",
        language="python",
        line=0,
        column=0,
        character=0,
        offset=0,
        name=name,
        truth=truth,
        defined_in="g.py",
        defined_in_path="/tmp/p/g.py",
        definers=("g.py",),
        document="\n",
    )


@pytest.mark.parametrize(
    "answer, name, exact, accepted, empty",
    [
        ("render_all(depth) + item", True, True, 24, False),
        ("render_all(depth) + item   \nmore", True, True, 24, False),
        ("render_all(depth)", True, False, 17, False),
        ("render_al", False, False, 9, False),
        ("render_alls()", False, False, 10, False),
        ("render_all", True, False, 10, False),
        (" render_all(depth) + item", False, False, 0, False),
        ("", False, False, 0, True),
        ("   ", False, False, 0, True),
    ],
)
def test_score(answer, name, exact, accepted, empty):
    s = score(answer, _hole())
    assert (s["name"], s["exact"], s["accepted_chars"], s["empty"]) == (name, exact, accepted, empty)
    assert s["truth_chars"] == 24


def _rec(project, answer, latency, hole=None):
    h = hole or _hole()
    return {"project": project, "latency_ms": latency, "final_ms": latency, "score": score(answer, h)}


def test_summarize_and_table_say_which_projects_gave_too_few():
    records = [
        _rec("a", "render_all(depth) + item", 100),
        _rec("a", "render_all()", 300),
        _rec("b", "", 200),
    ]
    s = summarize(records, ["a", "b", "c"])
    assert (s["holes"], s["name"], s["exact"], s["empty"], s["answered"]) == (3, 2, 1, 1, 2)
    assert s["accepted_chars_per_hole"] == round((24 + 11 + 0) / 3, 2)
    assert s["latency_p50_ms"] == 200
    assert s["by_project"]["a"]["name"] == 2 and s["by_project"]["c"]["holes"] == 0
    summaries = {"index": s, "fim-client": {"not_run": "no FIM template: not run", "holes": 0, "by_project": {}}}
    text = format_table(summaries, {"a": 2, "b": 1, "c": 0}, 2, "Cross-file quality, tuning half (tune): 3 holes")
    lines = text.splitlines()
    assert lines[0].startswith("Cross-file quality, tuning half (tune)")
    assert any(ln.startswith("name right (starts with the name)") and "67% (2/3)" in ln for ln in lines)
    assert any(ln.startswith("holes (a)") for ln in lines)
    assert any(ln.startswith("holes (b: too few, 1 of 2)") for ln in lines)
    assert any(ln.startswith("holes (c: too few, 0 of 2)") for ln in lines)
    assert "not run" in lines[3] and lines[-1] == "fim-client: no FIM template: not run"
    assert project_label("x", 15, 15) == "holes (x)"


def _archive(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_package_tree_extracts_the_whole_source_tree_and_reuses_it(tmp_path, monkeypatch):
    data = _archive(
        {
            "pkg-1.0/package.json": "{}",
            "pkg-1.0/README.md": "# x",
            "pkg-1.0/lib/a.js": "exports.a = 1;\n",
            "pkg-1.0/lib/sub/b.js": "exports.b = 2;\n",
            "pkg-1.0/index.js": "module.exports = require('./lib/a');\n",
            "pkg-1.0/test/a.test.js": "x\n",
            "pkg-1.0/lib/c.test.js": "x\n",
            "pkg-1.0/docs/d.js": "x\n",
            "pkg-1.0/examples/e.js": "x\n",
            "pkg-1.0/node_modules/dep/index.js": "x\n",
            "pkg-1.0/dist/bundle.js": "x\n",
            "pkg-1.0/lib/vendor.min.js": "x\n",
            "pkg-1.0/lib/long.js": "var x = '" + "a" * 3000 + "';\n",
            "pkg-1.0/lib/gen.js": "// @generated by a tool\nexports.g = 1;\n",
            "pkg-1.0/.eslintrc.js": "x\n",
            "pkg-1.0/lib/types.d.ts": "x\n",
        }
    )
    sha = hashlib.sha256(data).hexdigest()
    pkg = corpus.Package(
        "pkg", "npm", "1.0", "MIT", "javascript", "tune", "http://127.0.0.1:9/pkg-1.0.tgz", sha, ("pkg-1.0/index.js",)
    )
    cache = tmp_path / "cache"
    (cache / "archives").mkdir(parents=True)
    (cache / "archives" / f"{sha}-pkg-1.0.tgz").write_bytes(data)
    tree = corpus.package_tree(pkg, cache)
    assert tree.root == cache / "projects" / pkg.key / "pkg-1.0"
    assert [p.relative_to(tree.root).as_posix() for p in tree.files] == ["index.js", "lib/a.js", "lib/sub/b.js"]
    assert (tree.root / "package.json").is_file() and not (tree.root / "README.md").exists()
    assert (cache / "projects" / pkg.key / ".sha256").read_text().split() == [sha, corpus.TREE_RULES]

    # A second call reads the stamp only: no archive, no network.
    (cache / "archives" / f"{sha}-pkg-1.0.tgz").unlink()
    monkeypatch.setattr(corpus, "fetch_archive", lambda *a, **k: pytest.fail("fetched again"))
    assert corpus.package_tree(pkg, cache).files == tree.files


@pytest.mark.parametrize(
    "name, language, kept",
    [
        ("p/src/requests/models.py", "python", True),
        ("p/tests/test_models.py", "python", False),
        ("p/src/x/test_thing.py", "python", False),
        ("p/setup.py", "python", False),
        ("p/src/main/java/org/A.java", "java", True),
        ("p/src/test/java/org/ATest.java", "java", False),
        ("p/flag.go", "go", True),
        ("p/flag_test.go", "go", False),
        ("p/src/a.ts", "typescript", True),
        ("p/src/a.d.ts", "typescript", False),
        ("p/src/a.spec.ts", "typescript", False),
        ("p/src/a.js", "typescript", False),
        ("p/lib/a.mjs", "javascript", True),
        ("p/src/pkg.egg-info/x.py", "python", False),
    ],
)
def test_tree_keeps(name, language, kept):
    assert corpus.tree_keeps(name, language) is kept


def test_pick_packages_by_half_and_name():
    report = [p.name for p in pick_packages("report", [])]
    assert "requests" in report and "express" in report and "attrs" not in report
    assert all(p.language in ("python", "javascript", "typescript", "java", "go") for p in pick_packages("all", []))
    assert [p.name for p in pick_packages("tune", ["commander", "attrs"])] == ["attrs", "node-commander"]
    with pytest.raises(crossfile.ArgumentError, match="tune half"):
        pick_packages("report", ["attrs"])
    with pytest.raises(crossfile.ArgumentError, match="no definition finder"):
        pick_packages("tune", ["jansson"])
    with pytest.raises(crossfile.ArgumentError, match="matches no package"):
        pick_packages("all", ["nosuchpackage"])


@pytest.mark.parametrize(
    "argv",
    [
        ["--systems", "index,bogus"],
        ["--systems", "today,today"],
        ["--holes-per-file", "0"],
        ["--set", "workspace_index=false"],
        ["--set", "no_such_setting=1"],
        ["--half", "report", "--projects", "attrs"],
    ],
)
def test_main_refuses_bad_arguments(argv, capsys):
    assert crossfile.main(argv) == 2
    assert "python -m devtools.bench crossfile:" in capsys.readouterr().err


def test_main_list_needs_no_model(tmp_path, monkeypatch, capsys):
    project = _project(tmp_path, "python", PY_FILES)
    ph = ProjectHoles(project, project_counts(project), select_holes(project))
    monkeypatch.setattr(crossfile, "load_projects", lambda *a: [ph])
    assert crossfile.main(["--half", "tune", "--list"]) == 0
    out = capsys.readouterr().out
    assert "demo" in out and "(too few: 15 asked)" in out
    empty = ProjectHoles(project, project_counts(project), [])
    monkeypatch.setattr(crossfile, "load_projects", lambda *a: [empty])
    assert crossfile.main(["--half", "tune"]) == 2


class FakeClient:
    """Stands in for :class:`crossfile.CrossClient`: records the LSP traffic, answers from a script."""

    def __init__(self, stats=(), answer="render_all(1)"):
        self.calls: list[tuple] = []
        self.updates: dict = {}
        self._stats = list(stats)
        self.answer = answer

    def open(self, uri, language, text):
        self.calls.append(("open", uri, text))

    def close_doc(self, uri):
        self.calls.append(("close", uri))

    async def inline(self, uri, line, character):
        self.calls.append(("inline", uri, line, character))
        return self.answer, 12.5, None

    async def settle(self, uri, first):
        return first, 0, True, 0.0

    async def workspace_index(self):
        return self._stats.pop(0) if len(self._stats) > 1 else (self._stats[0] if self._stats else None)


def test_ask_sidecar_opens_the_definer_first_and_closes_both(tmp_path):
    project = _project(tmp_path, "python", PY_FILES)
    hole = make_hole(project, project.file("pkg/views.py"), 7, 18, "render_all")
    qc = FakeClient()
    raw = asyncio.run(ask_sidecar(qc, hole, open_definer=True))
    f_uri, g_uri = Path(hole.file).as_uri(), Path(hole.defined_in_path).as_uri()
    assert [c[0] for c in qc.calls] == ["open", "open", "inline", "close", "close"]
    assert qc.calls[0] == ("open", g_uri, (project.root / "pkg/models.py").read_text())
    assert qc.calls[1] == ("open", f_uri, hole.document)
    assert qc.calls[2] == ("inline", f_uri, 7, 18)
    assert raw["final"] == "render_all(1)" and raw["opened_definer"] is True
    qc = FakeClient()
    asyncio.run(ask_sidecar(qc, hole, open_definer=False))
    assert [c[:2] for c in qc.calls] == [("open", f_uri), ("inline", f_uri), ("close", f_uri)]


def test_wait_index(monkeypatch):
    monkeypatch.setattr(crossfile, "INDEX_MISSING_WAIT_S", 0.0)
    ready = {"state": "ready", "files": 3, "definitions": 10, "build_s": 0.1}
    wi, warning = asyncio.run(wait_index(FakeClient([{"state": "building"}, ready]), True))
    assert wi == ready and warning is None
    wi, warning = asyncio.run(wait_index(FakeClient([]), True))
    assert wi is None and "no workspace_index" in warning
    wi, warning = asyncio.run(wait_index(FakeClient([{"state": "building"}]), True, timeout_s=0.3))
    assert "not ready within" in warning
    assert asyncio.run(wait_index(FakeClient([{"state": "off"}]), False)) == ({"state": "off"}, None)
    assert "index state is 'off'" in asyncio.run(wait_index(FakeClient([{"state": "off"}]), True))[1]
    assert "but the index state is 'ready'" in asyncio.run(wait_index(FakeClient([ready]), False))[1]


def test_warm_up_never_asks_at_a_hole(tmp_path):
    project = _project(tmp_path, "python", PY_FILES)
    hole = make_hole(project, project.file("pkg/views.py"), 7, 18, "render_all")
    qc = FakeClient()
    asyncio.run(crossfile.warm_up(qc, hole))
    (_op, uri, text), (_inl, uri2, line, character), (_cl, uri3) = qc.calls
    assert uri == uri2 == uri3 and uri != Path(hole.file).as_uri() and not uri.startswith(project.root.as_uri())
    assert text == project.file("pkg/views.py").text and (line, character) == (0, len("from .models import Widget"))


def test_main_says_which_project_could_not_be_fetched(monkeypatch, capsys):
    def boom(*_a):
        raise corpus.CorpusError("express 4.21.1: GET https://registry.npmjs.org/x failed: refused")

    monkeypatch.setattr(crossfile, "load_projects", boom)
    assert crossfile.main(["--projects", "express"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a project could not be fetched: express 4.21.1" in err[0]


def test_run_writes_every_answer_and_fails_a_column_that_answered_nothing(tmp_path, monkeypatch):
    project = _project(tmp_path, "python", PY_FILES)
    ph = ProjectHoles(project, project_counts(project), select_holes(project))
    assert ph.holes

    async def fake_run_project(ph, systems, model, opts, workdir, runs, progress):
        for h in ph.holes:
            runs["index"].records.append(crossfile._record(h, {"final": h.truth, "latency_ms": 5.0}, h.truth))
            runs["today"].records.append(crossfile._record(h, {"final": "", "latency_ms": 7.0}, ""))

    monkeypatch.setattr(crossfile, "run_project", fake_run_project)
    result = asyncio.run(
        crossfile.run_crossfile(
            [ph],
            systems=["today", "index"],
            model=None,
            out_dir=tmp_path / "out",
            opts=crossfile.Options(),
            half="tune",
            seed=0,
            per_file=3,
            per_project=15,
        )
    )
    assert list(result.summaries) == ["index", "today"]  # the order of SYSTEMS
    n = len(ph.holes)
    assert result.summaries["index"]["exact"] == result.summaries["index"]["name"] == n
    assert result.failures == [f"today: answered nothing at {n} holes (every answer was empty)"]
    assert result.table.splitlines()[0].startswith("Cross-file quality, tuning half (tune):")
    assert f"holes (demo: too few, {n} of 15)" in result.table
    data = json.loads(result.json_path.read_text())
    assert result.json_path.name == "crossfile.json"
    assert len(data["columns"]["index"]["records"]) == n and len(data["holes"]) == n
    assert data["projects"]["demo"]["too_few"] is True and data["setup"]["half"] == "tune"
