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

Against the real SiliconFlow (``backend = "siliconflow"``) there are no simulator
records: upstream requests are the sidecar's own ``upstream.requests`` counter, streams
aborted its ``upstream.cancelled + upstream.closed_early + upstream.deadline`` (streams
it closed before their end), and tokens generated its :data:`SERVER_TOKENS_COUNTER`
counter when the server keeps one; otherwise the token rows show ``-``.

The **session timeline** (:func:`build_timeline`, :func:`plot_timeline`) is one file of
one run: key presses, accepts and pauses, the LSP answers (suggestions shown, answers
that came after the document had changed, empty answers), and the upstream streams the
simulated backend recorded, from request to end, aborted ones marked at their disconnect.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from sidecar.metrics import percentile

from .replay import GENERATION_PATHS

NOPREFETCH = "sidecar-noprefetch"  # the column the prefetch runs are compared with
#: The server counter (``sidecar.stats`` ``counters``) read as tokens generated when
#: there are no simulator records (the real backend). Absent: the token rows show ``-``.
SERVER_TOKENS_COUNTER = "tokens.generated"
#: Server counters whose sum is the streams the sidecar closed before their end.
SERVER_ABORT_COUNTERS = ("upstream.cancelled", "upstream.closed_early", "upstream.deadline")

ROWS: list[tuple[str, str]] = [
    ("tts_p50_ms", "time-to-suggestion at pauses p50 (ms)"),
    ("tts_p90_ms", "time-to-suggestion at pauses p90 (ms)"),
    ("tts_p99_ms", "time-to-suggestion at pauses p99 (ms)"),
    ("pauses_with_suggestion", "pauses that show a valid suggestion"),
    ("pauses_with_correct_suggestion", "pauses that show a right suggestion"),
    ("keys_shown", "keys with a suggestion before the next key"),
    ("keys_shown_right", "keys with a right suggestion before the next key"),
    ("keys_shown_p50_ms", "time to suggestion at those keys p50 / p90 (ms)"),
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
    ("retained", "accepted chars retained at 30 s / 2 min (of those measured)"),
    ("prefetch_counts", "prefetch wasted / cancelled / skipped"),
    ("upstream_requests", "upstream requests"),
    ("tokens_generated", "tokens generated"),
    ("prefill_tokens", "prompt tokens to evaluate per request p50 / p90"),
    ("answers_with_text", "LSP answers with text / sent"),
    ("key_lateness_ms", "typist lateness mean / max (ms)"),
]


def summarize(raw: dict[str, Any]) -> dict[str, Any]:
    """The table's numbers for one run (plain numbers; ``None`` when undefined)."""
    pauses = raw["pauses"]
    shown = [p["tts_ms"] for p in pauses if p["tts_ms"] is not None]
    updates = [p["update_ms"] for p in pauses if p["update_ms"] is not None]
    keystrokes = raw["keystrokes"]
    up = _upstream_figures(raw)
    n_up, tokens = up["requests"], up["tokens"]
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
        "pauses_correct": sum(1 for p in pauses if p["correct"]),
        "backend": raw.get("backend", "simulated"),
        "upstream_source": up["source"],
        "upstream_requests": n_up,
        "upstream_per_100_keys": (100.0 * n_up / keystrokes) if keystrokes and n_up is not None else None,
        "upstream_aborted": up["aborted"],
        "upstream_completed": up["completed"],
        "tokens_generated": tokens,
        "accepted": raw["accepts"],
        "accepted_chars": raw["accepted_chars"],
        # The sidecar's accepted-and-retained counts (completion/retention.py): only the
        # accepts whose horizon passed before the run's stats were read are measured.
        "retained": ((raw.get("server_stats") or {}).get("acceptance") or {}).get("retained"),
        "tokens_per_accepted_char": (tokens / raw["accepted_chars"])
        if raw["accepted_chars"] and tokens is not None
        else None,
        "lsp_sent": sent,
        "lsp_unanswered": sent - answered,
        "answers_with_text": lsp["non_empty_answers"],
        "keys_asked": lsp.get("keys_asked"),
        "keys_shown": lsp.get("keys_shown"),
        "keys_shown_right": lsp.get("keys_shown_right"),
        "keys_shown_p50_ms": percentile(lsp.get("keys_shown_ms") or [], 50),
        "keys_shown_p90_ms": percentile(lsp.get("keys_shown_ms") or [], 90),
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
        "prefetch_tokens": {
            "reserved": int(pf.get("tokens_reserved", 0)),
            "generated": int(pf.get("tokens_generated", 0)),
        }
        if prefetch_on
        else None,
        "prefetch_counts": {
            k: int(pf.get(k, 0)) for k in ("wasted", "cancelled", "skipped_budget", "skipped_busy", "skipped_cached")
        }
        if prefetch_on
        else None,
        "answers_from_prefetch": int(counters.get("answers.prefetch", 0)),
        # cl100k tokens after the beginning shared with the previous prompt (what a
        # llama.cpp engine evaluates again), per upstream request, from sidecar.stats.
        "prefill_tokens": (stats.get("sizes") or {}).get("prompt.new_tokens"),
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


def _upstream_figures(raw: dict[str, Any]) -> dict[str, Any]:
    """Upstream requests, aborts, completions and tokens of one run: from the simulated
    backend's records, or (real backend) from the server's counters, ``None`` where
    neither can tell."""
    if raw.get("backend", "simulated") == "simulated":
        gen = [r for r in raw["upstream"] if r.get("path") in GENERATION_PATHS]
        return {
            "source": "simulator",
            "requests": len(gen),
            "aborted": sum(1 for r in gen if r.get("disconnected")),
            "completed": sum(1 for r in gen if r.get("completed")),
            "tokens": sum(int(r.get("tokens_sent") or 0) for r in gen),
        }
    stats = raw.get("server_stats")
    counters = (stats or {}).get("counters")
    if not isinstance(counters, dict):
        return {"source": None, "requests": None, "aborted": None, "completed": None, "tokens": None}
    tokens = counters.get(SERVER_TOKENS_COUNTER)
    return {
        "source": "sidecar.stats",
        "requests": int(counters.get("upstream.requests", 0)),
        "aborted": sum(int(counters.get(k, 0)) for k in SERVER_ABORT_COUNTERS),
        "completed": None,
        "tokens": None if tokens is None else int(tokens),
    }


def compare(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Fill the cross-run figures: each prefetch run's tokens generated minus the
    ``sidecar-noprefetch`` run's (when both ran). Returns ``summaries``."""
    base = summaries.get(NOPREFETCH)
    for s in summaries.values():
        if (
            base is not None
            and s is not base
            and s.get("prefetch_enabled")
            and s["tokens_generated"] is not None
            and base["tokens_generated"] is not None
        ):
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
    if key == "pauses_with_correct_suggestion":
        return "-" if v is None else f"{100 * v:.0f}% ({s.get('pauses_correct', '?')}/{s['pauses']})"
    if key == "upstream_per_100_keys":
        return "-" if v is None else f"{v:.1f}"
    if key == "upstream_aborted":
        n = s["upstream_requests"]
        if v is None:
            return "-"
        return f"{v} ({100 * v / n:.0f}%)" if n else str(v)
    if key == "tokens_per_accepted_char":
        return "-" if v is None else f"{v:.2f}"
    if key == "accepted":
        return f"{v} ({s['accepted_chars']})"
    if key == "retained":
        if not v:
            return "-"
        return " / ".join(f"{r['retained_chars']}/{r['accepted_chars']}" for r in v)
    if key == "answers_with_text":
        return f"{v} / {s['inline_sent']}"
    if key in ("keys_shown", "keys_shown_right"):
        n = s.get("keys_asked")
        return "-" if v is None or not n else f"{100 * v / n:.0f}% ({v}/{n})"
    if key == "keys_shown_p50_ms":
        return "-" if v is None else f"{v:.0f} / {s['keys_shown_p90_ms']:.0f}"
    if key == "prefill_tokens":
        return "-" if not v or v.get("p50") is None else f"{v['p50']:.0f} / {v['p90']:.0f}"
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
            {
                "key": key,
                "label": label,
                **{m: summaries[m].get(key) for m in summaries},
                "display": {m: _cell(key, summaries[m]) for m in summaries},
            }
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
        ax.step(
            [0.0] + xs + [end],
            [0.0] + ys + [ys[-1] if ys else 0.0],
            where="post",
            label=f"{mode}: {len(xs)}/{len(recs)} {what}",
            linewidth=2,
        )
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


# ------------------------------------------------------------------ session timeline


def _r(t: float | None) -> float | None:
    return None if t is None else round(t, 4)


def build_timeline(raw: dict[str, Any], file_index: int = 0) -> dict[str, Any] | None:
    """The events of one session: file ``file_index`` of the run ``raw``, times in
    seconds from the moment the file was opened. ``None`` when the run never opened it.

    Event types (each with ``t``): ``key`` (a key press: ``chars``, the ``request_id`` it
    sent), ``accept`` (a suggestion accepted at the end of a pause: ``chars``, ``text``),
    ``pause`` (``t`` to ``end_t``, ``kind``), ``request`` (an inline completion request
    sent: ``id``, ``version``, ``cancel_sent``), ``suggestion`` (an answer with text for
    the document as it still was: shown; ``id``, ``text``, ``latency_ms``), ``stale`` (an
    answer with text that came after the document had changed), ``empty`` (an answer
    with nothing, or an error such as a cancel: ``error``), ``upstream`` (a generation
    request the simulated backend received: ``t`` to ``end_t``, ``first_token_t``,
    ``tokens``, ``outcome`` completed / aborted / open, ``text``) and ``abort`` (the
    moment the sidecar disconnected from an upstream stream: ``index``)."""
    windows = raw.get("file_windows") or []
    if not 0 <= file_index < len(windows):
        return None
    w = windows[file_index]
    start = w["opened_s"]
    end = w.get("closed_s")
    if start is None:
        return None

    def inside(t: float | None) -> bool:
        return t is not None and t >= start and (end is None or t <= end)

    ev: list[dict[str, Any]] = []
    for k in raw.get("keys") or []:
        if k.get("file") != w["file"] or not inside(k["t"]):
            continue
        if k.get("pause") and k.get("pause_from") is not None:
            ev.append(
                {"t": _r(k["pause_from"] - start), "type": "pause", "end_t": _r(k["t"] - start), "kind": k["pause"]}
            )
        e = {"t": _r(k["t"] - start), "type": k["kind"], "chars": k["chars"], "request_id": k.get("request_id")}
        if k["kind"] == "accept":
            e["text"] = k.get("text")
        ev.append(e)
    for q in raw.get("requests") or []:
        if q.get("uri") != w.get("uri") or not inside(q["sent_s"]):
            continue
        ev.append(
            {
                "t": _r(q["sent_s"] - start),
                "type": "request",
                "id": q["id"],
                "version": q["version"],
                "cancel_sent": q["cancel_sent"],
            }
        )
        if q.get("answered_s") is None:
            continue
        kind = ("suggestion" if q.get("current") else "stale") if q.get("text") else "empty"
        e = {"t": _r(q["answered_s"] - start), "type": kind, "id": q["id"], "latency_ms": q["latency_ms"]}
        if q.get("text"):
            e["text"] = q["text"]
        if q.get("error"):
            e["error"] = q["error"]
        ev.append(e)
    for u in raw.get("upstream") or []:
        if u.get("path") not in GENERATION_PATHS or not inside(u.get("received_at")):
            continue
        ended = u.get("disconnected_at") if u.get("disconnected") else u.get("ended_at")
        outcome = "aborted" if u.get("disconnected") else ("completed" if u.get("completed") else "open")
        ev.append(
            {
                "t": _r(u["received_at"] - start),
                "type": "upstream",
                "index": u.get("index"),
                "end_t": None if ended is None else _r(ended - start),
                "first_token_t": None if u.get("first_token_at") is None else _r(u["first_token_at"] - start),
                "tokens": u.get("tokens_sent"),
                "outcome": outcome,
                "status": u.get("status"),
                "text": u.get("text_sent"),
            }
        )
        if u.get("disconnected") and u.get("disconnected_at") is not None:
            ev.append({"t": _r(u["disconnected_at"] - start), "type": "abort", "index": u.get("index")})
    ev.sort(key=lambda e: e["t"])
    counts: dict[str, int] = {}
    for e in ev:
        counts[e["type"]] = counts.get(e["type"], 0) + 1
    return {
        "mode": raw.get("mode"),
        "backend": raw.get("backend", "simulated"),
        "file": w["file"],
        "file_index": file_index,
        "run_start_s": start,  # seconds from the run's start (the clock of its other records)
        "duration_s": None if end is None else _r(end - start),
        "upstream_recorded": raw.get("backend", "simulated") == "simulated",
        "counts": counts,
        "events": ev,
    }


def _lanes(spans: list[tuple[float, float]], cap: int) -> tuple[list[int], int]:
    """Greedy lane for each (start, end) so that overlapping spans do not share one
    (past ``cap`` lanes they wrap around). Returns the lanes and how many were used."""
    ends: list[float] = []
    out = []
    for a, b in spans:
        for i, e in enumerate(ends):
            if e <= a:
                ends[i] = b
                out.append(i)
                break
        else:
            if len(ends) < cap:
                ends.append(b)
                out.append(len(ends) - 1)
            else:
                i = min(range(cap), key=lambda j: ends[j])
                ends[i] = max(ends[i], b)
                out.append(i)
    return out, max(1, len(ends))


def _short(text: str, n: int = 18) -> str:
    t = text.replace("\n", "⏎").replace("\t", " ")
    return t if len(t) <= n else t[: n - 1] + "…"


def plot_timeline(path: Path, timeline: dict[str, Any], title: str, strip_s: float | None = None) -> None:
    """PNG of one session (see :func:`build_timeline`): time on x, cut into strips of
    ``strip_s`` seconds (default: equal strips of at most 15 s, longer when the session
    would need more than 8); in each, from top to bottom, the key presses (accepts as green
    triangles, with the accepted text; pauses shaded), the LSP answers (suggestions
    shown in green, answers for an older document version hollow, empty answers or
    cancels as grey dots), and the upstream streams as bars from request to end (blue
    completed, red aborted with a red x at the disconnect, a black tick at the first
    token)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ev = timeline["events"]
    by: dict[str, list[dict[str, Any]]] = {}
    for e in ev:
        by.setdefault(e["type"], []).append(e)
    last = max([timeline.get("duration_s") or 0.0] + [e.get("end_t") or e["t"] for e in ev] + [0.1])
    last *= 1.01
    if strip_s is None:  # equal strips of at most 15 s (at most 8 strips)
        strip_s = last / min(8, math.ceil(last / 15.0))
    n = max(1, math.ceil(last / strip_s - 1e-9))
    ups = by.get("upstream", [])
    spans = [(u["t"], u["end_t"] if u["end_t"] is not None else last) for u in ups]
    lane, n_lanes = _lanes(spans, cap=12)
    key_y, ans_y = n_lanes + 0.9, n_lanes
    height = n_lanes + 1.9  # room above the keys for the accepted text
    # Fixed inches: a header (title and legend), the strips, the x label.
    top_in, bottom_in, gap_in = 1.1, 0.55, 0.35
    strip_in = max(1.3, 0.2 * height + 0.4)
    fig_h = top_in + bottom_in + n * strip_in + (n - 1) * gap_in
    fig, axes = plt.subplots(n, 1, figsize=(15, fig_h), dpi=110, squeeze=False)
    fig.subplots_adjust(
        left=0.06, right=0.99, top=1 - top_in / fig_h, bottom=bottom_in / fig_h, hspace=gap_in / strip_in
    )
    axes = [a[0] for a in axes]
    for i, ax in enumerate(axes):
        lo, hi = i * strip_s, (i + 1) * strip_s
        for p in by.get("pause", []):
            ax.axvspan(p["t"], p["end_t"], color="#fdf0c2", zorder=0, lw=0)
        keys = [e["t"] for e in by.get("key", [])]
        ax.vlines(keys, key_y - 0.3, key_y + 0.3, color="0.3", lw=0.9, zorder=2)
        acc = by.get("accept", [])
        ax.scatter(
            [a["t"] for a in acc],
            [key_y] * len(acc),
            marker="^",
            s=70,
            color="tab:green",
            edgecolor="darkgreen",
            zorder=4,
        )
        for a in acc:
            if lo <= a["t"] < hi and a.get("text"):
                right = a["t"] > lo + 0.85 * strip_s  # near the strip's end: the label goes left
                ax.annotate(
                    _short(a["text"]),
                    (a["t"], key_y + 0.3),
                    fontsize=7,
                    color="darkgreen",
                    ha="right" if right else "left",
                    va="bottom",
                    xytext=(-3 if right else 3, 0),
                    textcoords="offset points",
                    clip_on=True,
                )
        sug = by.get("suggestion", [])
        ax.scatter([e["t"] for e in sug], [ans_y] * len(sug), marker="o", s=22, color="tab:green", zorder=3)
        stale = by.get("stale", [])
        ax.scatter(
            [e["t"] for e in stale],
            [ans_y] * len(stale),
            marker="o",
            s=22,
            facecolor="none",
            edgecolor="0.45",
            zorder=3,
        )
        empty = by.get("empty", [])
        ax.scatter([e["t"] for e in empty], [ans_y - 0.25] * len(empty), marker=".", s=8, color="0.6", zorder=2)
        for u, ln in zip(ups, lane):
            b = u["end_t"] if u["end_t"] is not None else last
            aborted = u["outcome"] == "aborted"
            ax.barh(
                n_lanes - 1 - ln,
                max(b - u["t"], 0.004),
                left=u["t"],
                height=0.62,
                color="#f4a6a6" if aborted else "#8fb8e0",
                edgecolor="tab:red" if aborted else "tab:blue",
                lw=0.6,
                zorder=2,
            )
            if u.get("first_token_t") is not None:
                ax.plot(
                    [u["first_token_t"]] * 2,
                    [n_lanes - 1 - ln - 0.31, n_lanes - 1 - ln + 0.31],
                    color="black",
                    lw=1.0,
                    zorder=3,
                )
        ab = {e["index"]: e["t"] for e in by.get("abort", [])}
        ax.scatter(
            [ab[u["index"]] for u, ln in zip(ups, lane) if u["index"] in ab],
            [n_lanes - 1 - ln for u, ln in zip(ups, lane) if u["index"] in ab],
            marker="x",
            s=36,
            color="red",
            linewidths=1.6,
            zorder=5,
        )
        if not timeline.get("upstream_recorded"):
            ax.text(
                lo + 0.01 * strip_s,
                (n_lanes - 1) / 2,
                "no per-request upstream records (real backend)",
                fontsize=8,
                color="0.4",
                va="center",
            )
        ax.set_xlim(lo, hi)
        ax.set_ylim(-0.6, height)
        ax.set_yticks([key_y, ans_y, (n_lanes - 1) / 2])
        ax.set_yticklabels(["keys", "answers", "upstream"], fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(True, axis="x", alpha=0.25)
    axes[-1].set_xlabel("time since the file was opened (s)")
    handles = [
        Line2D([], [], color="0.3", marker="|", lw=0, markersize=10, label="key press"),
        Line2D([], [], color="tab:green", marker="^", lw=0, markersize=8, label="accept (text accepted)"),
        Patch(color="#fdf0c2", label="typist pause"),
        Line2D([], [], color="tab:green", marker="o", lw=0, markersize=5, label="suggestion shown (answer with text)"),
        Line2D(
            [],
            [],
            color="0.45",
            marker="o",
            markerfacecolor="none",
            lw=0,
            markersize=5,
            label="answer for an older version",
        ),
        Line2D([], [], color="0.6", marker=".", lw=0, markersize=5, label="empty answer / cancelled"),
        Patch(facecolor="#8fb8e0", edgecolor="tab:blue", label="upstream stream (request to end)"),
        Patch(facecolor="#f4a6a6", edgecolor="tab:red", label="aborted stream"),
        Line2D([], [], color="red", marker="x", lw=0, markersize=7, label="disconnect"),
        Line2D([], [], color="black", marker="|", lw=0, markersize=9, label="first token"),
    ]
    fig.legend(
        handles=handles, loc="upper center", ncol=5, fontsize=8, frameon=False, bbox_to_anchor=(0.5, 1 - 0.45 / fig_h)
    )
    c = timeline["counts"]
    fig.suptitle(
        f"{title}\nsession timeline of {timeline['mode']}: {timeline['file']}, {c.get('key', 0)} keys, "
        f"{c.get('accept', 0)} accepts, {c.get('suggestion', 0)} suggestions shown, "
        f"{c.get('upstream', 0)} upstream streams ({c.get('abort', 0)} aborted)",
        fontsize=10,
        y=1 - 0.05 / fig_h,
        va="top",
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
