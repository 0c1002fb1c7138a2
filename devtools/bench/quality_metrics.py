"""Scoring of the quality benchmark: one answer against one hole, and the table.

Per hole, with *answer* the text a system inserts at the cursor (``score``):

``exact``
    The answer's first line equals the truth (``Hole.truth_line``), both stripped of
    surrounding whitespace. The answer's first line is its first line after one leading
    line break (an ``end_of_line`` answer starts with one); an empty answer is never exact.
``accepted_chars``
    The length, in code points, of the longest common prefix of the answer and
    ``Hole.middle``: what a user who accepts the suggestion word by word keeps.
``empty``
    The answer is empty or only whitespace.
``duplicate``
    The answer's first line repeats text that already follows the cursor: compared with
    all whitespace removed and trailing ``;`` and ``,`` dropped, it equals the rest of
    the cursor line (``mid_line`` holes have one) or the first non-blank line after the
    cursor line; never when the answer is exact or empty.
``stub``
    (sidecar columns) The first answer is not empty and is a strict prefix of the final
    text (the last ``sidecar/inlineCompletionUpdate`` of the request): a client without
    update support shows the stub and never the rest.
``late``
    (sidecar columns) The first answer is empty but the final text is not: a client
    without update support shows nothing at all there.

Summaries (``summarize``) count holes, exact first lines (count and share, overall and
per hole kind), mean accepted characters per hole (overall and per kind) and their share
of the truth's characters, empty answers (count and share, overall and per kind),
duplicates, failed requests, the median latency to the first answer (ms) and, where
known, the median time to the final text (ms), and the stub and late shares among holes
with a non-empty final text. A column that was not run (``not_run_summary``: e.g. the
``fim-client`` column on a model without a FIM template) has a ``not_run`` reason and no
figures; the table shows ``not run`` in its cells.

The table (``format_table``): rows are metrics, columns are systems; counted metrics read
``37% (11/30)`` (share rounded to a whole percent, then count / holes).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from typing import Any

from .quality_holes import KINDS, Hole

_WS = re.compile(r"\s+")


def first_line(text: str) -> str:
    """The first line of ``text`` after one leading line break, unstripped."""
    if text.startswith("\r\n"):
        text = text[2:]
    elif text.startswith("\n"):
        text = text[1:]
    return text.split("\n", 1)[0].rstrip("\r")


def common_prefix_len(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (code points)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _norm(line: str) -> str:
    return _WS.sub("", line).rstrip(";,")


def following_lines(hole: Hole) -> tuple[str, str]:
    """(rest of the cursor line, first non-blank line after the cursor line) in the
    hole's document."""
    rest, _, after = hole.suffix.partition("\n")
    nxt = next((ln for ln in after.split("\n") if ln.strip()), "")
    return rest, nxt


def is_duplicate(answer: str, hole: Hole) -> bool:
    """See the module doc (``duplicate``); the exact check is the caller's."""
    got = _norm(first_line(answer))
    if not got:
        return False
    return any(got == _norm(s) for s in following_lines(hole) if _norm(s))


def score(answer: str, hole: Hole) -> dict[str, Any]:
    """The per-hole metrics of the module doc for ``answer`` at ``hole``."""
    empty = not answer.strip()
    exact = not empty and first_line(answer).strip() == hole.truth_line
    return {
        "exact": exact,
        "accepted_chars": common_prefix_len(answer, hole.middle),
        "truth_chars": len(hole.middle),
        "empty": empty,
        "duplicate": not exact and not empty and is_duplicate(answer, hole),
    }


def is_stub(first: str, final: str) -> bool:
    """The non-empty first answer is a strict prefix of the final text."""
    return bool(first.strip()) and first != final and final.startswith(first)


def is_late(first: str, final: str) -> bool:
    """The first answer is empty and the final text is not."""
    return not first.strip() and bool(final.strip())


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 1) if vals else None


def _share(n: int, d: int) -> float | None:
    return round(100.0 * n / d, 1) if d else None


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Totals of one system's per-hole records (each has ``kind``, ``score``,
    ``latency_ms``, optional ``final_ms`` / ``stub`` / ``error``). Shares are percent,
    times milliseconds."""
    n = len(records)
    sc = [r["score"] for r in records]
    exact = sum(s["exact"] for s in sc)
    acc = sum(s["accepted_chars"] for s in sc)
    truth = sum(s["truth_chars"] for s in sc)
    with_final = [r for r in records if r.get("stub") is not None]
    final_texts = sum(bool((r.get("reference_final") or r.get("final") or "").strip()) for r in with_final)
    out: dict[str, Any] = {
        "holes": n,
        "answered": sum(not s["empty"] for s in sc),
        # Shown and wrong: a suggestion with no accepted character (the confidence gate's
        # target, completion/gate.py); exact among the shown ones.
        "shown_wrong": sum(1 for s in sc if not s["empty"] and s["accepted_chars"] == 0),
        "exact_of_shown": _share(exact, sum(not s["empty"] for s in sc)),
        "errors": sum(1 for r in records if r.get("error")),
        "exact": exact,
        "exact_first_line_pct": _share(exact, n),
        "accepted_chars_per_hole": round(acc / n, 2) if n else None,
        "accepted_chars_pct": _share(acc, truth),
        "empty": sum(s["empty"] for s in sc),
        "empty_pct": _share(sum(s["empty"] for s in sc), n),
        "duplicate_pct": _share(sum(s["duplicate"] for s in sc), n),
        "latency_p50_ms": _median(r.get("latency_ms") for r in records),
        "final_p50_ms": _median(r.get("final_ms") for r in records),
        "stub_pct": _share(sum(bool(r["stub"]) for r in with_final), final_texts) if with_final else None,
        "late_pct": _share(sum(bool(r.get("late")) for r in with_final), final_texts) if with_final else None,
        "by_kind": {},
    }
    for kind in KINDS:
        rs = [r for r in records if r["kind"] == kind]
        if rs:
            k_exact = sum(r["score"]["exact"] for r in rs)
            k_empty = sum(r["score"]["empty"] for r in rs)
            out["by_kind"][kind] = {
                "holes": len(rs),
                "exact": k_exact,
                "exact_first_line_pct": _share(k_exact, len(rs)),
                "accepted_chars_per_hole": round(sum(r["score"]["accepted_chars"] for r in rs) / len(rs), 2),
                "empty": k_empty,
                "empty_pct": _share(k_empty, len(rs)),
            }
    return out


def not_run_summary(reason: str) -> dict[str, Any]:
    """The summary of a column that was not run (``reason`` says why): no figures."""
    return {
        "not_run": reason,
        "holes": 0,
        "answered": None,
        "shown_wrong": None,
        "exact_of_shown": None,
        "errors": None,
        "exact": None,
        "exact_first_line_pct": None,
        "accepted_chars_per_hole": None,
        "accepted_chars_pct": None,
        "empty": None,
        "empty_pct": None,
        "duplicate_pct": None,
        "latency_p50_ms": None,
        "final_p50_ms": None,
        "stub_pct": None,
        "late_pct": None,
        "by_kind": {},
    }


def ratio_cell(n: int | None, d: int | None) -> str:
    """``37% (11/30)``: ``n`` of ``d`` as a whole percent and the counts; ``-`` without holes."""
    if n is None or not d:
        return "-"
    return f"{100.0 * n / d:.0f}% ({n}/{d})"


#: (summary key, label, format); format ``"ratio"`` shows the key's count of the holes.
ROWS = (
    ("holes", "holes", "{:d}"),
    ("answered", "answered (non-empty)", "{:d}"),
    ("shown_wrong", "shown and wrong (0 chars right)", "ratio"),
    ("exact", "exact first line", "ratio"),
    ("exact_of_shown", "exact first line % of shown", "{:.1f}"),
    ("accepted_chars_per_hole", "accepted chars / hole", "{:.2f}"),
    ("accepted_chars_pct", "accepted chars % of truth", "{:.1f}"),
    ("empty", "empty answers", "ratio"),
    ("duplicate_pct", "duplicates text after cursor %", "{:.1f}"),
    ("latency_p50_ms", "first answer p50 ms", "{:.0f}"),
    ("final_p50_ms", "final text p50 ms", "{:.0f}"),
    ("stub_pct", "first answer is a stub %", "{:.1f}"),
    ("late_pct", "first answer empty, text later %", "{:.1f}"),
    ("errors", "failed requests", "{:d}"),
)

#: Per hole kind: (by_kind key, label, format), one row per kind each.
KIND_ROWS = (
    ("exact", "exact first line", "ratio"),
    ("accepted_chars_per_hole", "accepted chars / hole", "{:.2f}"),
    ("empty", "empty answers", "ratio"),
)

NOT_RUN_CELL = "not run"


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _metric_cell(summary: dict[str, Any], key: str, fmt: str) -> str:
    if summary.get("not_run"):
        return NOT_RUN_CELL
    if fmt == "ratio":
        return ratio_cell(summary.get(key), summary.get("holes"))
    return _cell(summary.get(key), fmt)


def table_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The table as rows of cells: a header, then one row per metric and, for the
    per-kind metrics, per kind (kinds no column has are left out)."""
    names = list(summaries)
    rows = [["metric", *names]]
    for key, label, fmt in ROWS:
        rows.append([label, *(_metric_cell(summaries[n], key, fmt) for n in names)])
    kinds = [k for k in KINDS if any(k in summaries[n].get("by_kind", {}) for n in names)]
    for key, label, fmt in KIND_ROWS:
        for kind in kinds:
            cells = []
            for n in names:
                s = summaries[n]
                per = s.get("by_kind", {}).get(kind)
                cells.append(NOT_RUN_CELL if s.get("not_run") else "-" if per is None else _metric_cell(per, key, fmt))
            rows.append([f"{label} ({kind})", *cells])
    return rows


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """A plain-text table: rows are metrics, columns are systems; a line under it for
    each column that was not run, saying why."""
    rows = table_rows(summaries)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, s in summaries.items():
        if s.get("not_run"):
            lines.append(f"{name}: {s['not_run']}")
    return "\n".join(lines)
