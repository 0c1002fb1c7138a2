"""The benchmark's figures: one summary per run, the table, the JSON and the CDF plot.

Definitions (each run separately):

- **time-to-suggestion at pauses, p50/p90/p99 (ms)**: over the pauses that showed a
  suggestion, from the last key before the pause to the first answer for the current
  document version with text (nearest-rank percentiles; with a few dozen pauses p99 is
  the slowest one). The CDF plot divides by *all* pauses, so a curve levels off at the
  share of pauses that showed anything.
- **pauses that show a valid suggestion**: an answer with text, for the document as it
  is (not a stale version), arrived before the typist went on.
- **upstream requests per 100 keystrokes**: generation requests the simulated backend
  received, per 100 key presses (typed keys plus accepts).
- **upstream streams aborted**: requests whose client disconnected before the end
  (the simulated backend records the disconnect).
- **tokens generated per accepted character**: all tokens the backend streamed, over
  the characters of accepted suggestions.
- **LSP requests left unanswered**: inline completion and command requests sent minus
  those answered (with a result or an error), after the final grace period.
- **prefetch hit rate**: the server's ``prefetch.used / prefetch.issued`` at the end of
  the run (``sidecar.stats``); ``-`` for a run without prefetch.
- **time-to-suggestion after an accept, p50/p90 (ms)**: over the accepts whose
  re-request (sent right after the accept) was answered with text before the next key
  press, from the accept's ``didChange`` to that answer. **Accepts with no suggestion
  before the next key** counts the others (answered empty, answered late, or not yet).
  Accepts that reach the end of the typed region are left out (nothing is left to
  suggest there; the simulated model answers nothing).
- **prefetch tokens reserved / generated**: the server's ``prefetch.tokens_reserved``
  (prompt estimate plus ``max_tokens``, counted against the per-minute budget) and
  ``prefetch.tokens_generated`` (tokens the prefetch streams produced).
- **tokens generated vs no-prefetch**: this run's tokens generated (all streams, as the
  simulated backend counts them) minus the ``sidecar-noprefetch`` run's; the two runs
  accept different suggestions, so part of the difference is the typing, not prefetch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..metrics import percentile
from .replay import GENERATION_PATHS

NOPREFETCH = "sidecar-noprefetch"  # the column the prefetch runs are compared with

ROWS: list[tuple[str, str]] = [
    ("tts_p50_ms", "time-to-suggestion at pauses p50 (ms)"),
    ("tts_p90_ms", "time-to-suggestion at pauses p90 (ms)"),
    ("tts_p99_ms", "time-to-suggestion at pauses p99 (ms)"),
    ("pauses_with_suggestion", "pauses that show a valid suggestion"),
    ("upstream_per_100_keys", "upstream requests per 100 keystrokes"),
    ("upstream_aborted", "upstream streams aborted"),
    ("tokens_per_accepted_char", "tokens generated per accepted character"),
    ("lsp_unanswered", "LSP requests left unanswered"),
    ("prefetch_hit_rate", "prefetch hit rate (used / issued)"),
    ("accept_tts_p50_ms", "time-to-suggestion after an accept p50 (ms)"),
    ("accept_tts_p90_ms", "time-to-suggestion after an accept p90 (ms)"),
    ("accepts_without_suggestion", "accepts with no suggestion before the next key"),
    ("prefetch_tokens", "prefetch tokens reserved / generated"),
    ("tokens_vs_noprefetch", "tokens generated vs no-prefetch"),
]

EXTRA_ROWS: list[tuple[str, str]] = [
    ("pauses", "pauses"),
    ("accepted", "suggestions accepted (chars)"),
    ("prefetch_counts", "prefetch wasted / cancelled / skipped"),
    ("upstream_requests", "upstream requests"),
    ("tokens_generated", "tokens generated"),
    ("answers_with_text", "LSP answers with text / sent"),
    ("key_lateness_ms", "typist lateness mean / max (ms)"),
]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """The table's numbers for one run (plain numbers; ``None`` when undefined)."""
    pauses = raw["pauses"]
    shown = [p["tts_ms"] for p in pauses if p["tts_ms"] is not None]
    updates = [p["update_ms"] for p in pauses if p["update_ms"] is not None]
    gen = [r for r in raw["upstream"] if r.get("path") in GENERATION_PATHS]
    keystrokes = raw["keystrokes"]
    tokens = sum(int(r.get("tokens_sent") or 0) for r in gen)
    lsp = raw["lsp"]
    sent = lsp["inline_sent"] + lsp["commands_sent"]
    answered = lsp["inline_answered"] + lsp["commands_answered"]
    all_accepts = raw.get("after_accept") or []
    accepts = [a for a in all_accepts if not a.get("region_end")]  # nothing left to suggest there
    after = [a["tts_ms"] for a in accepts if a["tts_ms"] is not None]
    stats = raw.get("server_stats") or {}
    pf = stats.get("prefetch") or {}
    counters = stats.get("counters") or {}
    prefetch_on = bool(raw.get("prefetch"))
    issued = int(pf.get("issued", 0))
    return {
        "tts_p50_ms": percentile(shown, 50),
        "tts_p90_ms": percentile(shown, 90),
        "tts_p99_ms": percentile(shown, 99),
        "tts_samples": len(shown),
        "update_p50_ms": percentile(updates, 50),
        "pauses": len(pauses),
        "pauses_shown": len(shown),
        "pauses_with_suggestion": (len(shown) / len(pauses)) if pauses else None,
        "pauses_with_correct_suggestion": (sum(1 for p in pauses if p["correct"]) / len(pauses)) if pauses else None,
        "upstream_requests": len(gen),
        "upstream_per_100_keys": (100.0 * len(gen) / keystrokes) if keystrokes else None,
        "upstream_aborted": sum(1 for r in gen if r.get("disconnected")),
        "upstream_completed": sum(1 for r in gen if r.get("completed")),
        "tokens_generated": tokens,
        "accepted": raw["accepts"],
        "accepted_chars": raw["accepted_chars"],
        "tokens_per_accepted_char": (tokens / raw["accepted_chars"]) if raw["accepted_chars"] else None,
        "lsp_sent": sent,
        "lsp_unanswered": sent - answered,
        "answers_with_text": lsp["non_empty_answers"],
        "inline_sent": lsp["inline_sent"],
        "keystrokes": keystrokes,
        "keys_typed": raw["keys_typed"],
        "wall_s": raw["wall_s"],
        "key_lateness_mean_ms": raw["key_lateness_ms"]["mean"],
        "key_lateness_max_ms": raw["key_lateness_ms"]["max"],
        "errors": len(raw["errors"]),
        "prefetch_enabled": prefetch_on,
        "prefetch_hit_rate": (int(pf.get("used", 0)) / issued) if prefetch_on and issued else None,
        "prefetch": {k: pf[k] for k in sorted(pf)},  # the server's counters, raw
        "prefetch_issued": issued,
        "prefetch_used": int(pf.get("used", 0)),
        "prefetch_wasted": int(pf.get("wasted", 0)),
        "prefetch_cancelled": int(pf.get("cancelled", 0)),
        "prefetch_skipped": sum(int(pf.get(k, 0)) for k in ("skipped_budget", "skipped_busy", "skipped_cached")),
        "prefetch_tokens_reserved": int(pf.get("tokens_reserved", 0)),
        "prefetch_tokens_generated": int(pf.get("tokens_generated", 0)),
        "prefetch_tokens": {"reserved": int(pf.get("tokens_reserved", 0)),
                            "generated": int(pf.get("tokens_generated", 0))} if prefetch_on else None,
        "prefetch_counts": {k: int(pf.get(k, 0)) for k in ("wasted", "cancelled", "skipped_budget",
                                                            "skipped_busy", "skipped_cached")} if prefetch_on else None,
        "answers_from_prefetch": int(counters.get("answers.prefetch", 0)),
        "acceptance": stats.get("acceptance"),
        "accept_tts_p50_ms": percentile(after, 50),
        "accept_tts_p90_ms": percentile(after, 90),
        "accept_tts_samples": len(after),
        "accepts_measured": len(accepts),
        "accepts_at_region_end": len(all_accepts) - len(accepts),
        "accepts_without_suggestion": len(accepts) - len(after),
        "accepts_answered_late": sum(1 for a in accepts if a["late_ms"] is not None),
        "accepts_answered_empty": sum(1 for a in accepts if a["answered_empty_ms"] is not None),
        "accept_window_p50_ms": percentile([a["window_ms"] for a in accepts if a["window_ms"] is not None], 50),
        "tokens_vs_noprefetch": None,  # filled by compare()
        "tokens_vs_noprefetch_share": None,
    }


def compare(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fill the cross-run figures: each prefetch run's tokens generated minus the
    ``sidecar-noprefetch`` run's (when both ran). Returns ``summaries``."""
    base = summaries.get(NOPREFETCH)
    for s in summaries.values():
        if base is not None and s is not base and s.get("prefetch_enabled"):
            diff = s["tokens_generated"] - base["tokens_generated"]
            s["tokens_vs_noprefetch"] = diff
            s["tokens_vs_noprefetch_share"] = (diff / base["tokens_generated"]) if base["tokens_generated"] else None
    return summaries


def _cell(key: str, s: dict[str, Any]) -> str:
    v = s.get(key)
    if key.startswith(("tts_", "accept_tts_")):
        return "-" if v is None else f"{v:.0f}"
    if key == "prefetch_hit_rate":
        if not s.get("prefetch_enabled"):
            return "-"
        rate = "-" if v is None else f"{100 * v:.0f}%"
        return f"{rate} ({s['prefetch_used']}/{s['prefetch_issued']})"
    if key == "accepts_without_suggestion":
        return f"{v}/{s['accepts_measured']}"
    if key == "prefetch_tokens":
        return "-" if v is None else f"{v['reserved']} / {v['generated']}"
    if key == "prefetch_counts":
        return "-" if v is None else f"{s['prefetch_wasted']} / {s['prefetch_cancelled']} / {s['prefetch_skipped']}"
    if key == "tokens_vs_noprefetch":
        if v is None:
            return "-"
        share = s.get("tokens_vs_noprefetch_share")
        return f"{v:+d}" + ("" if share is None else f" ({100 * share:+.0f}%)")
    if key == "pauses_with_suggestion":
        return "-" if v is None else f"{100 * v:.0f}% ({s['pauses_shown']}/{s['pauses']})"
    if key == "upstream_per_100_keys":
        return "-" if v is None else f"{v:.1f}"
    if key == "upstream_aborted":
        n = s["upstream_requests"]
        return f"{v} ({100 * v / n:.0f}%)" if n else str(v)
    if key == "tokens_per_accepted_char":
        return "-" if v is None else f"{v:.2f}"
    if key == "accepted":
        return f"{v} ({s['accepted_chars']})"
    if key == "answers_with_text":
        return f"{v} / {s['inline_sent']}"
    if key == "key_lateness_ms":
        mean, mx = s["key_lateness_mean_ms"], s["key_lateness_max_ms"]
        return "-" if mean is None else f"{mean:.1f} / {mx:.0f}"
    return "-" if v is None else str(v)


def format_table(summaries: dict[str, dict[str, Any]]) -> str:
    """The benchmark table: one column per run, the required rows, then context rows."""
    modes = list(summaries)
    label_w = max(len(label) for _, label in ROWS + EXTRA_ROWS)
    cells = {m: {k: _cell(k, summaries[m]) for k, _ in ROWS + EXTRA_ROWS} for m in modes}
    col_w = {m: max([len(m)] + [len(c) for c in cells[m].values()]) for m in modes}
    lines = ["".ljust(label_w) + "".join("  " + m.rjust(col_w[m]) for m in modes)]
    rule = "-" * len(lines[0])
    lines.append(rule)
    for key, label in ROWS:
        lines.append(label.ljust(label_w) + "".join("  " + cells[m][key].rjust(col_w[m]) for m in modes))
    lines.append(rule)
    for key, label in EXTRA_ROWS:
        lines.append(label.ljust(label_w) + "".join("  " + cells[m][key].rjust(col_w[m]) for m in modes))
    return "\n".join(lines)


def table_json(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "columns": list(summaries),
        "rows": [
            {"key": key, "label": label,
             **{m: summaries[m].get(key) for m in summaries},
             "display": {m: _cell(key, summaries[m]) for m in summaries}}
            for key, label in ROWS + EXTRA_ROWS
        ],
    }


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def write_json(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_jsonable(payload), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _cdf(ax: Any, raws: dict[str, dict[str, Any]], key: str, sample: str, window: str, what: str) -> None:
    """One CDF panel: ``raw[key]`` records (but those at the region's end), ``sample`` the
    time field, ``window`` the record's duration (the curve runs to the longest one)."""
    longest = 0.0
    for mode, raw in raws.items():
        recs = [r for r in raw.get(key) or [] if not r.get("region_end")]
        xs = sorted(r[sample] for r in recs if r[sample] is not None)
        longest = max([longest] + [r[window] for r in recs if r.get(window) is not None])
        if not recs:
            continue
        ys = [(i + 1) / len(recs) for i in range(len(xs))]
        end = max([longest] + xs)
        ax.step([0.0] + xs + [end], [0.0] + ys + [ys[-1] if ys else 0.0], where="post",
                label=f"{mode}: {len(xs)}/{len(recs)} {what}", linewidth=2)
    ax.set_ylim(0, 1)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right", fontsize=8)


def plot_cdf(path: Path, raws: dict[str, dict[str, Any]], title: str) -> None:
    """PNG with two CDFs, one curve per run: time to suggestion over all pauses, and
    time to suggestion over all accepts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 8), dpi=120)
    _cdf(ax, raws, "pauses", "tts_ms", "duration_ms", "pauses showed a suggestion")
    ax.set_xlabel("time to suggestion after the last key before a pause (ms)")
    ax.set_ylabel("share of all pauses")
    ax.set_title(title, fontsize=10)
    _cdf(ax2, raws, "after_accept", "tts_ms", "window_ms", "accepts showed a suggestion")
    ax2.set_xlabel("time to suggestion after an accept, before the next key (ms)")
    ax2.set_ylabel("share of all accepts")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
