"""What the workspace index offers after a member access, a base-class slot and inside a
subclass (sidecar/completion/crossfile/candidates.py), on real projects written to
tmp_path and indexed by the real WorkspaceIndex (tree-sitter): each case is one that the
tuning half of the cross-file benchmark showed missing from the prompt."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sidecar.completion.crossfile import CrossFileContext
from sidecar.completion.crossfile.candidates import context_words, subwords
from sidecar.completion.crossfile.workspace import WorkspaceIndex


def _project(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


@pytest.fixture
def index():
    made: list[WorkspaceIndex] = []

    def build(root: Path) -> WorkspaceIndex:
        ix = WorkspaceIndex()
        made.append(ix)
        ix.set_folders([str(root)])
        deadline = time.monotonic() + 10
        while ix.stats()["state"] != "ready":
            assert time.monotonic() < deadline, ix.stats()
            time.sleep(0.01)
        return ix

    yield build
    for ix in made:
        ix.stop()


def _block(ix: WorkspaceIndex, root: Path, rel: str, language: str, marker: str = "<CURSOR>") -> str:
    """The snippets' text for a request at ``marker`` in ``rel`` (removed from the text)."""
    text = (root / rel).read_text(encoding="utf-8")
    at = text.index(marker)
    doc = text.replace(marker, "")
    uri = (root / rel).as_uri()
    docs = {uri: SimpleNamespace(source=doc, language_id=language)}
    cf = CrossFileContext(lambda: docs, lambda: str(root), index=ix)
    snippets = cf.select(uri, doc[:at].count("\n"), doc[:at], doc[at:], 256)
    return "\n".join(s.text for s in snippets)


def test_subwords_and_context_words() -> None:
    assert subwords("toLongString") == {"long", "string"}
    assert subwords("HTTPServer") == {"http", "server"}
    assert subwords("equals") == {"equal"} and subwords("class") == {"class"}
    assert "throw" in context_words("} catch (E e) { throw Failable.")


def test_members_of_a_union_type_follow_its_parts_and_their_bases(tmp_path: Path, index) -> None:
    filler = "".join(f"export interface Filler{i} {{\n  field{i}: number\n}}\n" for i in range(30))
    types = filler + (
        "export interface BaseState {\n  parent_?: BaseState\n  finalized_: boolean\n}\n"
        "export interface ObjectState extends BaseState {\n  copy_: any\n}\n"
        "export interface ArrayState extends BaseState {\n  copy_: any[]\n}\n"
        "export type AnyState =\n  | ObjectState\n  | ArrayState\n"
    )
    use = (
        "import {AnyState} from './types'\n\n"
        "export function finish(value: any) {\n  const state: AnyState = value.s\n  state.<CURSOR>\n}\n"
    )
    _project(tmp_path, {"src/types.ts": types, "src/finish.ts": use})
    block = _block(index(tmp_path), tmp_path, "src/finish.ts", "typescript")
    assert "finalized_" in block and "copy_" in block


def test_a_submodule_imported_by_name_gives_its_top_level_names(tmp_path: Path, index) -> None:
    _project(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/_config.py": "_run_validators = True\n\n\ndef set_run_validators(run):\n    pass\n",
            "pkg/make.py": "from . import _config\n\n\ndef check(v):\n    if _config.<CURSOR>\n",
        },
    )
    assert "_run_validators" in _block(index(tmp_path), tmp_path, "pkg/make.py", "python")


def test_a_large_class_shows_the_member_the_context_names_first(tmp_path: Path, index) -> None:
    methods = "".join(f"    @Deprecated\n    public static void check{i}(Object o) {{\n    }}\n" for i in range(40))
    failable = (
        "package p;\n\npublic class Failable {\n"
        + methods
        + "    private static void hidden() {\n    }\n"
        + "    public static RuntimeException rethrow(Throwable t) {\n        return null;\n    }\n}\n"
    )
    use = (
        "package p;\n\nclass Visitors {\n    void run() {\n        try {\n            go();\n"
        "        } catch (Throwable t) {\n            throw Failable.<CURSOR>\n        }\n    }\n}\n"
    )
    _project(tmp_path, {"p/Failable.java": failable, "p/Visitors.java": use})
    block = _block(index(tmp_path), tmp_path, "p/Visitors.java", "java")
    assert "rethrow(Throwable t)" in block  # ranked first by "throw", though it is the 42nd member
    assert "hidden" not in block and "@Deprecated" not in block


def test_go_methods_of_a_type_are_found_in_the_package(tmp_path: Path, index) -> None:
    _project(
        tmp_path,
        {
            "uuid.go": "package uuid\n\ntype UUID [16]byte\n\nfunc Parse(s string) (UUID, error) {\n"
            "\tvar uuid UUID\n\terr := uuid.<CURSOR>\n\treturn uuid, err\n}\n",
            "marshal.go": "package uuid\n\n"
            + "".join(f"func Helper{i}() {{\n}}\n\n" for i in range(30))
            + "func (uuid *UUID) UnmarshalBinary(data []byte) error {\n\treturn nil\n}\n",
        },
    )
    assert "UnmarshalBinary" in _block(index(tmp_path), tmp_path, "uuid.go", "go")


def test_inside_a_subclass_the_inherited_members_and_after_extends_the_likely_base(tmp_path: Path, index) -> None:
    base = (
        "package p;\n\npublic abstract class AbstractCircuitBreaker {\n"
        "    public boolean isOpen() {\n        return false;\n    }\n}\n"
    )
    other = "package p;\n\npublic class Unrelated {\n}\n"
    sub = (
        "package p;\n\npublic class ThresholdCircuitBreaker extends AbstractCircuitBreaker {\n"
        "    void check() {\n        if (<CURSOR>\n    }\n}\n"
    )
    declare = "package p;\n\npublic class EventCountCircuitBreaker extends <CURSOR>\n"
    _project(
        tmp_path,
        {"p/AbstractCircuitBreaker.java": base, "p/Unrelated.java": other, "p/T.java": sub, "p/E.java": declare},
    )
    ix = index(tmp_path)
    assert "isOpen()" in _block(ix, tmp_path, "p/T.java", "java")
    block = _block(ix, tmp_path, "p/E.java", "java")
    assert "class AbstractCircuitBreaker" in block and "Unrelated" not in block


def test_a_variable_named_after_a_class_gets_the_fields_its_constructor_assigns(tmp_path: Path, index) -> None:
    option = (
        "class Option {\n  constructor(flags) {\n    this.flags = flags;\n    this.presetArg = undefined;\n  }\n\n"
        "  name() {\n    return this.flags;\n  }\n}\n\nexports.Option = Option;\n"
    )
    use = "function parse(option, val) {\n  if (val == null && option.<CURSOR>\n}\n"
    _project(tmp_path, {"lib/option.js": option, "lib/command.js": use})
    assert "presetArg" in _block(index(tmp_path), tmp_path, "lib/command.js", "javascript")


def test_where_a_name_starts_a_go_file_gets_its_package_functions_the_context_names_first(
    tmp_path: Path, index
) -> None:
    util = "package uuid\n\n" + "".join(f"func helper{i}(b []byte) {{\n}}\n\n" for i in range(40))
    util += "func randomBits(b []byte) {\n}\n\nfunc (u UUID) Method() {\n}\n"
    node = (
        "package uuid\n\ntype UUID [16]byte\n\nvar nodeID [6]byte\n\nfunc setNode(name string) {\n"
        "\t// no interface found: use a random node ID\n\t<CURSOR>\n}\n"
    )
    _project(tmp_path, {"util.go": util, "node.go": node})
    block = _block(index(tmp_path), tmp_path, "node.go", "go")
    assert "func randomBits(b []byte)" in block  # the 41st function, named by "random"
    assert "Method()" not in block  # a method is not called by a bare name


def test_the_word_being_typed_picks_the_package_function_it_begins(tmp_path: Path, index) -> None:
    util = "package uuid\n\n" + "".join(f"func helper{i}() {{\n}}\n\n" for i in range(40)) + "func xtob() {\n}\n"
    use = "package uuid\n\nfunc parse(s string) {\n\tok := xt<CURSOR>\n}\n"
    _project(tmp_path, {"util.go": util, "parse.go": use})
    assert "func xtob()" in _block(index(tmp_path), tmp_path, "parse.go", "go")


def test_a_union_value_shows_the_base_its_parts_share_first(tmp_path: Path, index) -> None:
    types = (
        "export interface BaseState {\n  finalized_: boolean\n  scope_: Scope\n}\n\n"
        + "".join(
            f"export interface Part{i}State extends BaseState {{\n"
            + "".join(f"  field{i}_{j}: number\n" for j in range(12))
            + "}\n\n"
            for i in range(4)
        )
        + "export type AnyState =\n  | Part0State\n  | Part1State\n  | Part2State\n  | Part3State\n"
    )
    use = (
        'import {AnyState} from "./types"\n\nexport function current(value: any) {\n'
        "  const state: AnyState | undefined = value.state\n  if (state) {\n    state.<CURSOR>\n  }\n}\n"
    )
    _project(tmp_path, {"src/types.ts": types, "src/current.ts": use})
    block = _block(index(tmp_path), tmp_path, "src/current.ts", "typescript")
    assert "finalized_: boolean" in block


def test_a_typed_object_literal_key_and_a_jsdoc_parameter_get_the_types_members(tmp_path: Path, index) -> None:
    types = (
        "export interface BaseState {\n  modified_: boolean\n  isManual_: boolean\n}\n\n"
        "export interface ObjectState extends BaseState {\n  base_: any\n}\n"
    )
    use = (
        'import {ObjectState} from "./types"\n\ntype State = ObjectState\n\nexport function make(base: any) {\n'
        "  const state: State = {\n    base_: base,\n    <CURSOR>\n  }\n  return state\n}\n"
    )
    command = (
        "class Command {\n  constructor(name) {\n    this.commands = [];\n    this._helpDescription = 'help';\n"
        "  }\n\n  run() {\n    return this.commands;\n  }\n}\n\nexports.Command = Command;\n"
    )
    help_js = (
        "class Help {\n  /**\n   * @param {Command} cmd\n   */\n  options(cmd) {\n"
        "    return cmd.<CURSOR>\n  }\n}\n\nexports.Help = Help;\n"
    )
    _project(tmp_path, {"src/types.ts": types, "src/make.ts": use, "lib/command.js": command, "lib/help.js": help_js})
    ix = index(tmp_path)
    assert "modified_: boolean" in _block(ix, tmp_path, "src/make.ts", "typescript")
    assert "this._helpDescription" in _block(ix, tmp_path, "lib/help.js", "javascript")


def test_package_names_leave_out_test_files_other_languages_and_methods_and_find_java_interfaces(
    tmp_path: Path, index
) -> None:
    _project(
        tmp_path,
        {
            "pkg/util.go": "package pkg\n\nfunc realHelper() int {\n\treturn 1\n}\n",
            "pkg/util_test.go": "package pkg\n\nfunc mustFixture() int {\n\treturn 2\n}\n",
            "pkg/helper.c": "int must_c_thing(int x) {\n  return x;\n}\n",
            "pkg/main.go": "package pkg\n\nfunc run() {\n\tx := mu<CURSOR>\n}\n",
            "src/p/Shape.java": "package p;\n\npublic interface Shape {\n    double area();\n}\n",
            "src/p/Use.java": "package p;\n\nclass Use {\n    void f() {\n        Sha<CURSOR>\n    }\n}\n",
        },
    )
    ix = index(tmp_path)
    from sidecar.completion.crossfile.candidates import _is_test, _package_names

    assert _is_test("pkg/util_test.go")
    main = str(tmp_path / "pkg/main.go")
    offered = _package_names(ix, main, "go", "package pkg\n\nfunc run() {\n\tx := mu", frozenset())
    lines = "\n".join((ix.lines(f) or [])[n] for _k, f, nums in offered for n in nums)
    assert "realHelper" in lines and "mustFixture" not in lines and "must_c_thing" not in lines
    assert "public interface Shape" in _block(ix, tmp_path, "src/p/Use.java", "java")


def test_a_name_typed_in_full_comes_first_among_those_it_begins(tmp_path: Path, index) -> None:
    util = "package pkg\n\n" + "".join(f"func helper{i}() {{\n}}\n\n" for i in range(40))
    _project(tmp_path, {"pkg/util.go": util, "pkg/main.go": "package pkg\n\nfunc run() {\n\thelper3<CURSOR>\n}\n"})
    from sidecar.completion.crossfile.candidates import _package_names

    ix = index(tmp_path)
    offered = _package_names(ix, str(tmp_path / "pkg/main.go"), "go", "func run() {\n\thelper3", frozenset())
    lines = [(ix.lines(f) or [])[n] for _k, f, nums in offered for n in nums]
    assert "func helper3() {" in lines and all(ln.startswith("func helper3") for ln in lines)
