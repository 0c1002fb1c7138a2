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
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..metrics import percentile
from .replay import GENERATION_PATHS

ROWS: list[tuple[str, str]] = [
    ("tts_p50_ms", "time-to-suggestion at pauses p50 (ms)"),
    ("tts_p90_ms", "time-to-suggestion at pauses p90 (ms)"),
    ("tts_p99_ms", "time-to-suggestion at pauses p99 (ms)"),
    ("pauses_with_suggestion", "pauses that show a valid suggestion"),
    ("upstream_per_100_keys", "upstream requests per 100 keystrokes"),
    ("upstream_aborted", "upstream streams aborted"),
    ("tokens_per_accepted_char", "tokens generated per accepted character"),
    ("lsp_unanswered", "LSP requests left unanswered"),
]

EXTRA_ROWS: list[tuple[str, str]] = [
    ("pauses", "pauses"),
    ("accepted", "suggestions accepted (chars)"),
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
    }


def _cell(key: str, s: dict[str, Any]) -> str:
    v = s.get(key)
    if key.startswith("tts_"):
        return "-" if v is None else f"{v:.0f}"
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


def plot_cdf(path: Path, raws: dict[str, dict[str, Any]], title: str) -> None:
    """PNG of the time-to-suggestion CDF over all pauses, one curve per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8), dpi=120)
    longest = 0.0
    for mode, raw in raws.items():
        pauses = raw["pauses"]
        xs = sorted(p["tts_ms"] for p in pauses if p["tts_ms"] is not None)
        longest = max([longest] + [p["duration_ms"] for p in pauses])
        if not pauses:
            continue
        ys = [(i + 1) / len(pauses) for i in range(len(xs))]
        end = max([longest] + xs)
        ax.step([0.0] + xs + [end], [0.0] + ys + [ys[-1] if ys else 0.0], where="post",
                label=f"{mode}: {len(xs)}/{len(pauses)} pauses showed a suggestion", linewidth=2)
    ax.set_xlabel("time to suggestion after the last key before a pause (ms)")
    ax.set_ylabel("share of all pauses with a suggestion shown")
    ax.set_ylim(0, 1)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
