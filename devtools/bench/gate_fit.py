"""Fit and judge the confidence gate (``sidecar/completion/gate.py``) on a quality
benchmark run made with everything shown: a held-out split by file.

    python -m devtools.bench.gate_fit QUALITY_JSON [QUALITY_JSON ...] [--system sidecar] [--test-files lru.go,histogram.rs]
                                      [--test-json QUALITY_JSON ...] [--max-chars-loss 5] [--out gate_fit.json]

With ``--test-json`` the split is by run instead of by file: the positional runs are the
training side (the real-code corpus's tuning half, ``quality --corpus tune``) and the
``--test-json`` runs the held-out side (``quality --corpus report``); ``--test-files`` is
then ignored.

Each hole the system answered becomes one example: the gate's features of the first
answer, which is what the gate scores, and the label "some of it was right" (at least
one accepted character). In a run made with the gate on at threshold 0 (``--set
gate_enabled=true --set gate_threshold=0``: everything shown) the features are the
sidecar's own, read from ``sidecar.stats`` (``gate.recent``) after each hole, token
log-probabilities included; otherwise they are worked out here from the first answer's
text (``gate.features``: hole kind, language, first-line length, more lines; a fresh
stream; no log-probabilities). Each example with log-probabilities is fitted twice,
with and without them, so that the weights also serve a backend that sends none. A
logistic model is fitted on the training files (batch gradient descent from zero
weights, an L2 pull towards zero, language weights left at zero: ``FROZEN``), and the threshold is
the one that removes the most shown-and-wrong suggestions on the training files while
accepted characters per hole fall by at most ``--max-chars-loss`` percent. Both are
then applied, unchanged, to the test files, and a table prints one row per setting
(gate off, gate on, and gate on without log-probabilities where the run had them):
suggestions shown, shown-and-wrong (no accepted character), exact first line among
those shown, accepted characters per hole; then the features by effect (weight times
the feature's spread on the training holes). The JSON has the weights and the rows. Exits 1 when the run had no answered hole on either side of the split.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

from sidecar.completion import gate

LANG = {
    ".py": "python",
    ".ts": "typescript",
    ".js": "javascript",
    ".c": "c",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".cpp": "cpp",
}


def examples(run: dict[str, Any], system: str) -> list[dict[str, Any]]:
    """One example per hole of ``system`` in a quality.json ``run``."""
    out = []
    for r in run["columns"][system]["records"]:
        file = r["hole"].split(":")[1]
        shown = r.get("shown") or ""
        # The gate scores the request's first answer (for a client with updates, the
        # finished lines when the first line is complete); the label is the final text's.
        first = r.get("first") or ""
        d = r.get("gate")
        if isinstance(d, dict):  # the sidecar's own decision (a run with the gate on)
            f = gate.Features(**{k: d[k] for k in gate.Features.__dataclass_fields__ if k in d})
        else:
            f = gate.features(
                first or shown,
                r["kind"],
                "stream",
                LANG.get(Path(file).suffix, "other"),
                open_stream=first != (r.get("final") or first),
            )  # more text came after the answer
        e = {
            "file": file,
            "kind": r["kind"],
            "shown": bool(shown.strip()),
            "x": f.vector(),
            "right": r["score"]["accepted_chars"] > 0,
            "chars": r["score"]["accepted_chars"],
            "exact": r["score"]["exact"],
        }
        if f.mean_logprob is not None:
            # The same suggestion as a backend without log-probabilities (or the cache)
            # would give it: fitted together, the text-only weights stand alone and the
            # log-probability weights are what they add.
            e["bare"] = dataclasses.replace(f, mean_logprob=None, min_logprob=None, first_logprob=None).vector()
        out.append(e)
    return out


def bare(exs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``exs`` as seen without log-probabilities (those that had none stay as they are)."""
    return [dict(e, x=e.get("bare", e["x"])) for e in exs]


#: Features left at zero in the fit: the language. The split is by file and every file
#: is its own language, so a language weight learned on the training files cannot be
#: judged on the held-out ones (it only learns those files); on the user's machine the
#: online model still learns one per language.
FROZEN = frozenset(i for i, n in enumerate(gate.FEATURE_NAMES) if n.startswith("lang="))


def fit(
    train: list[dict[str, Any]], epochs: int = 2000, lr: float = 0.2, frozen: frozenset[int] = FROZEN
) -> list[float]:
    """Batch gradient descent on the log-loss from zero weights, with an L2 pull
    (``gate.L2``) towards zero (so the fit does not depend on the shipped defaults);
    the weights of ``frozen`` features stay zero."""
    w = [0.0] * len(gate.FEATURE_NAMES)
    shown = [e for e in train if e["shown"]]
    for _ in range(epochs):
        grad = [0.0] * len(w)
        for e in shown:
            p = 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, e["x"]))))
            err = (1.0 if e["right"] else 0.0) - p
            for i, xi in enumerate(e["x"]):
                grad[i] += err * xi
        n = max(1, len(shown))
        w = [0.0 if i in frozen else wi + lr * (g / n - gate.L2 * wi) for i, (wi, g) in enumerate(zip(w, grad))]
    return w


def row(exs: list[dict[str, Any]], w: list[float] | None, threshold: float) -> dict[str, Any]:
    """The figures for ``exs`` with the gate off (``w`` None) or on."""

    def passes(e):
        if not e["shown"]:
            return False
        if w is None:
            return True
        return 1 / (1 + math.exp(-sum(a * b for a, b in zip(w, e["x"])))) >= threshold

    shown = [e for e in exs if passes(e)]
    holes = len(exs)
    return {
        "holes": holes,
        "shown": len(shown),
        "shown_and_wrong": sum(1 for e in shown if not e["right"]),
        "exact_among_shown": sum(1 for e in shown if e["exact"]),
        "accepted_chars_per_hole": round(sum(e["chars"] for e in shown) / holes, 2) if holes else 0.0,
    }


def choose_threshold(train: list[dict[str, Any]], w: list[float], max_loss_pct: float) -> float:
    off = row(train, None, 0.0)
    best, best_wrong = 0.0, off["shown_and_wrong"]
    for t in [i / 100 for i in range(1, 100)]:
        on = row(train, w, t)
        if off["accepted_chars_per_hole"] and on["accepted_chars_per_hole"] < off["accepted_chars_per_hole"] * (
            1 - max_loss_pct / 100
        ):
            continue
        if on["shown_and_wrong"] < best_wrong:
            best, best_wrong = t, on["shown_and_wrong"]
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("quality_json", nargs="+", help="quality.json files of runs with the gate off")
    ap.add_argument("--system", default="sidecar")
    ap.add_argument("--test-files", default="lru.go,histogram.rs")
    ap.add_argument(
        "--test-json",
        nargs="+",
        default=None,
        help="quality.json files of the held-out side (then every positional run is training)",
    )
    ap.add_argument("--max-chars-loss", type=float, default=5.0)
    ap.add_argument("--out", default="gate_fit.json")
    a = ap.parse_args(argv)
    exs = [e for path in a.quality_json for e in examples(json.loads(Path(path).read_text(encoding="utf-8")), a.system)]
    if a.test_json:
        train = exs
        test = [
            e for path in a.test_json for e in examples(json.loads(Path(path).read_text(encoding="utf-8")), a.system)
        ]
        test_files = {e["file"] for e in test}
    else:
        test_files = set(a.test_files.split(","))
        train = [e for e in exs if e["file"] not in test_files]
        test = [e for e in exs if e["file"] in test_files]
    if not any(e["shown"] for e in train) or not any(e["shown"] for e in test):
        print("gate_fit: no answered hole on one side of the split; nothing to fit", file=sys.stderr)
        return 1
    with_lp = any("bare" in e for e in train)
    w = fit(train + [dict(e, x=e["bare"]) for e in train if "bare" in e])
    t = choose_threshold(train, w, a.max_chars_loss)
    rows = {
        "train": {"off": row(train, None, t), "on": row(train, w, t)},
        "test": {"off": row(test, None, t), "on": row(test, w, t)},
    }
    if with_lp:
        rows["train"]["on_no_logprobs"] = row(bare(train), w, t)
        rows["test"]["on_no_logprobs"] = row(bare(test), w, t)
    print(
        f"gate fitted on {sorted({e['file'] for e in train})}, threshold {t:.2f}; held-out files {sorted(test_files)}"
    )
    cols = ("holes", "shown", "shown_and_wrong", "exact_among_shown", "accepted_chars_per_hole")
    print(f"{'split/gate':<12}" + "".join(f"{c:>26}" for c in cols))
    for split in ("train", "test"):
        for g in rows[split]:
            print(f"{split + '/' + g:<12}" + "".join(f"{rows[split][g][c]:>26}" for c in cols))
    # What mattered: each weight times its feature's spread on the shown training holes.
    xs = [e["x"] for e in train if e["shown"]]
    spread = [(sum((x[i] - sum(v[i] for v in xs) / len(xs)) ** 2 for x in xs) / len(xs)) ** 0.5 for i in range(len(w))]
    print("features by |weight| x spread on the training holes:")
    for n, wi, sd in sorted(zip(gate.FEATURE_NAMES, w, spread), key=lambda t: -abs(t[1] * t[2])):
        if wi and sd:
            print(f"  {n:<18} weight {wi:+.2f}  spread {sd:.2f}  effect {abs(wi * sd):.2f}")
    Path(a.out).write_text(
        json.dumps({"threshold": t, "weights": dict(zip(gate.FEATURE_NAMES, w)), "rows": rows}, indent=1),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
