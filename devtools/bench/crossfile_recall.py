"""Does the cross-file name reach the prompt? The cross-file benchmark's holes, no model.

``python -m devtools.bench crossfile_recall --half tune`` builds the sidecar's own
workspace index (``sidecar.completion.crossfile``) over each project of the half, then,
for each hole of ``python -m devtools.bench crossfile`` (same seed and limits), asks the
sidecar's cross-file selection what it would put in the prompt with only the hole's file
open, at the local budget (``crossfile_tokens`` for a local engine, cl100k tokens), and
checks whether the hole's name X stands in it as a whole identifier, and in which kind
of snippet (definition, outline, similar code, a receiver's members). It also says
whether X stands in the plain FIM client's suffix (the first ``--fim-suffix-chars``
characters after the cursor): a name there reaches every system without the index.

A model can only write a name it has seen (or guesses), so this is the ceiling the index
gives the model; it separates a retrieval miss from a model miss in seconds instead of
the benchmark's quarter hour. Prints a table per project and writes ``recall.json``
(every hole: name, whether in the block, which snippets, the block's size, the
selection's time in ms) to ``--out``.
Exit 1 when a project cannot be fetched or its index does not finish in 60 s; 2 on bad
arguments.

Tune on the tuning half only (docs/benchmarks.md, "The real-code corpus").
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from .crossfile_holes import CrossHole

DEFAULT_FIM_SUFFIX_CHARS = 1000
BEFORE_CHARS = 4000  # the prefix the selection reads (it reads less: identifiers_near, the query lines)
AFTER_CHARS = 800


class _Doc:
    """An open document as pygls gives it to the selection: ``source`` and ``language_id``."""

    def __init__(self, source: str, language_id: str) -> None:
        self.source = source
        self.language_id = language_id


def _has_name(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", text) is not None


def hole_recall(hole: CrossHole, index: Any, root: str, budget: int, fim_suffix_chars: int) -> dict[str, Any]:
    """What the selection gives at ``hole`` with only its file open (see the module doc)."""
    from sidecar.completion.crossfile import CrossFileContext

    uri = Path(hole.file).resolve().as_uri()
    docs = {uri: _Doc(hole.document, hole.language)}
    cf = CrossFileContext(lambda: docs, root=lambda: root, index=index)
    before = hole.document[max(0, hole.offset - BEFORE_CHARS) : hole.offset]
    after = hole.document[hole.offset : hole.offset + AFTER_CHARS]
    t0 = time.perf_counter()
    snippets = cf.select(uri, hole.line, before, after, budget)
    select_ms = (time.perf_counter() - t0) * 1000
    with_name = [s for s in snippets if _has_name(s.text, hole.name)]
    return {
        "id": hole.id,
        "project": hole.project,
        "rel": hole.rel,
        "name": hole.name,
        "truth": hole.truth,
        "in_block": bool(with_name),
        "kinds": sorted({s.kind for s in with_name}),
        "snippets": [{"path": s.path, "line": s.line, "kind": s.kind, "chars": len(s.text)} for s in snippets],
        "in_fim_suffix": _has_name(hole.document[hole.offset : hole.offset + fim_suffix_chars], hole.name),
        "defined_in": hole.defined_in,
        "definer_in_block": any(s.path.endswith(hole.defined_in) for s in snippets),
        "select_ms": round(select_ms, 2),
    }


def _wait_ready(index: Any, timeout_s: float = 60.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if index.state == "ready":
            return True
        time.sleep(0.05)
    return False


def run(half: str, projects: list[str], seed: int, per_file: int, per_project: int, fim_suffix_chars: int) -> dict:
    from sidecar.completion.crossfile import LOCAL_TOKENS
    from sidecar.completion.crossfile.workspace import WorkspaceIndex

    from .crossfile import load_projects, pick_packages

    out: dict[str, Any] = {"half": half, "seed": seed, "budget_tokens": LOCAL_TOKENS, "holes": [], "failed": []}
    for ph in load_projects(pick_packages(half, projects), seed, per_file, per_project):
        root = str(ph.project.root)
        index = WorkspaceIndex()
        index.set_folders([root])
        try:
            if not _wait_ready(index):
                out["failed"].append(f"{ph.project.name}: the index did not finish in 60 s")
                continue
            for hole in ph.holes:
                out["holes"].append(hole_recall(hole, index, root, LOCAL_TOKENS, fim_suffix_chars))
        finally:
            index.stop()
    return out


def format_table(result: dict[str, Any]) -> str:
    rows = [("project", "holes", "name in block", "definer in block", "name in client suffix", "in block, not suffix")]
    names = list(dict.fromkeys(h["project"] for h in result["holes"]))
    for name in [*names, "all"]:
        hs = [h for h in result["holes"] if name in ("all", h["project"])]
        n = len(hs)
        if not n:
            continue

        def pct(k: int, n: int = n) -> str:
            return f"{100 * k / n:.0f}% ({k}/{n})"

        rows.append(
            (
                name,
                str(n),
                pct(sum(h["in_block"] for h in hs)),
                pct(sum(h["definer_in_block"] for h in hs)),
                pct(sum(h["in_fim_suffix"] for h in hs)),
                pct(sum(h["in_block"] and not h["in_fim_suffix"] for h in hs)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    title = (
        f"Cross-file name in the prompt's block, no model ({result['half']} half, seed {result['seed']}, "
        f"budget {result['budget_tokens']} tokens)"
    )
    lines = [title, ""] + ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    kinds: dict[str, int] = {}
    for h in result["holes"]:
        for k in h["kinds"]:
            kinds[k] = kinds.get(k, 0) + 1
    ms = sorted(h["select_ms"] for h in result["holes"])
    if ms:
        lines.append("")
        lines.append(
            f"selection time per hole (a new block, nothing cached): p50 {ms[len(ms) // 2]:.1f} ms, "
            f"p90 {ms[min(len(ms) - 1, int(len(ms) * 0.9))]:.1f} ms, max {ms[-1]:.1f} ms"
        )
    lines.append("")
    lines.append(
        "snippet kinds that carried the name: " + (", ".join(f"{k} {v}" for k, v in sorted(kinds.items())) or "none")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m devtools.bench crossfile_recall", description=__doc__.split("\n\n")[0])
    p.add_argument("--half", choices=("tune", "report", "all"), default="tune")
    p.add_argument("--projects", default="", help="comma-separated package names (default: the half's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--holes-per-file", type=int, default=3)
    p.add_argument("--holes-per-project", type=int, default=15)
    p.add_argument("--fim-suffix-chars", type=int, default=DEFAULT_FIM_SUFFIX_CHARS)
    p.add_argument("--out", default="bench-results/crossfile-recall")
    try:
        args = p.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    from .corpus import CorpusError
    from .crossfile import ArgumentError

    try:
        result = run(
            args.half,
            [x for x in args.projects.split(",") if x],
            args.seed,
            args.holes_per_file,
            args.holes_per_project,
            args.fim_suffix_chars,
        )
    except ArgumentError as exc:
        print(f"crossfile_recall: {exc}", file=sys.stderr)
        return 2
    except CorpusError as exc:
        print(f"crossfile_recall: the corpus cannot be used: {exc}", file=sys.stderr)
        return 1
    print(format_table(result))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "recall.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"\nwrote {out / 'recall.json'}")
    for why in result["failed"]:
        print(f"crossfile_recall: {why}", file=sys.stderr)
    if result["failed"] or not result["holes"]:
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
