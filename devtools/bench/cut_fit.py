"""Fit and judge the confidence cut (``sidecar/completion/postprocess/confidence.py``) on
multi-line holes of the real-code corpus.

    python -m devtools.bench.cut_fit [--half tune|report] [--holes N] [--seed S]
                                     [--thresholds -0.5,-1,...] [--model NAME|PATH] [--out cut_fit.json]

A *block hole* empties ``LINES`` (3) consecutive code lines inside an indented block
down to the first one's indentation, cursor at its end (as after Enter), so the truth is
several lines. The model is the managed engine's (our launcher, the installed code model:
``auto`` as the sidecar would pick, or ``--model``), asked once per hole over real HTTP
(``POST /v1/completions``, the model's FIM template around the last 2,000 characters
before the cursor and the first 1,000 after it, temperature 0, 64 tokens, ``logprobs``),
in document order. Its text and token log-probabilities are then fed, token by token, to
the sidecar's own stream filter (``StreamFilter``: every postprocessing rule) with the
cut off and at each threshold. Per setting the table gives: holes; suggestions with
more than one line; *all right* (every line of the suggestion is the truth's line at
that place, ignoring indentation: the user can take it whole); *first right, rest wrong*
(the first line is right and a later one is not: what the cut is for); right lines per
hole (the suggestion's leading lines that match the truth). A threshold is picked on the
tuning half (the most "all right" suggestions, ties to the lower right-lines loss) and
then only reported on the reporting half. Exit 1 when the engine answered nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx

from sidecar.completion.context import build_context
from sidecar.completion.families import template_for
from sidecar.completion.postprocess import StreamFilter

from .corpus import CorpusError, corpus_files
from .quality_holes import MIN_LINE_INDEX, _indent, is_code_line

LINES = 3
THRESHOLDS = (-0.25, -0.5, -0.75, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def block_holes(files: list[tuple[Path, str, str]], n: int, seed: int) -> list[dict]:
    """Up to ``n`` block holes over ``files`` ((path, text, language)), round-robin."""
    queues = []
    for path, text, lang in files:
        lines = text.split("\n")
        cands = []
        for i in range(MIN_LINE_INDEX, len(lines) - LINES):
            ind = _indent(lines[i])
            block = lines[i : i + LINES]
            if (
                ind
                and lines[i - 1].strip()
                and all(is_code_line(ln, lang) and _indent(ln).startswith(ind) for ln in block)
            ):
                cands.append(i)
        random.Random(f"{seed}:block:{path.name}").shuffle(cands)
        queues.append((path, text, lang, cands))
    holes: list[dict] = []
    while len(holes) < n and any(q[3] for q in queues):
        for path, text, lang, cands in queues:
            if len(holes) >= n or not cands:
                continue
            i = cands.pop()
            lines = text.split("\n")
            ind = _indent(lines[i])
            doc_lines = lines[:i] + [ind] + lines[i + LINES :]
            offset = sum(len(ln) + 1 for ln in doc_lines[:i]) + len(ind)
            holes.append(
                {
                    "file": path.name,
                    "language": lang,
                    "line": i,
                    "document": "\n".join(doc_lines),
                    "offset": offset,
                    "truth": [ln.strip() for ln in lines[i : i + LINES]],
                }
            )
    holes.sort(key=lambda h: (h["file"], h["offset"]))
    return holes


def judge(text: str, truth: list[str]) -> tuple[int, int, bool]:
    """(lines, leading right lines, all right) of suggestion ``text`` against ``truth``."""
    got = [ln.strip() for ln in text.split("\n") if ln.strip()]
    right = 0
    for g, t in zip(got, truth):
        if g != t:
            break
        right += 1
    return len(got), right, bool(got) and right == len(got)


def replay(hole: dict, tokens: list[tuple[str, float]], cut: float | None) -> str:
    ctx = build_context(hole["document"], hole["offset"], hole["language"], 1024, 256)
    f = StreamFilter(ctx, cut)
    for text, lp in tokens:
        f.token_logprobs.append((text, lp))
        if f.feed(text):
            break
    return f.text()


def summarize(rows: list[tuple[int, int, bool]]) -> dict:
    n = len(rows)
    return {
        "holes": n,
        "multi_line": sum(1 for r in rows if r[0] > 1),
        "all_right": sum(1 for r in rows if r[2]),
        "first_right_rest_wrong": sum(1 for r in rows if r[1] >= 1 and r[1] < r[0]),
        "right_lines_per_hole": round(sum(r[1] for r in rows) / n, 3) if n else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", default="tune", choices=("tune", "report"))
    ap.add_argument("--holes", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--thresholds", default=",".join(str(t) for t in THRESHOLDS))
    ap.add_argument("--model", default=None, help="a catalog name or GGUF path (default: what auto picks)")
    ap.add_argument("--out", default="cut_fit.json")
    a = ap.parse_args(argv)
    from sidecar.models.hardware import default_threads
    from sidecar.models.select import choose

    choice = choose(a.model, None) if a.model and not a.model.endswith(".gguf") else choose(None, a.model)
    if choice.path is None or choice.error:
        print(f"cut_fit: no code model: {choice.error or choice.note}", file=sys.stderr)
        return 2
    try:
        files = [(f.path, f.path.read_text(encoding="utf-8"), f.language) for f in corpus_files(a.half)]
    except CorpusError as exc:
        print(f"cut_fit: {exc}", file=sys.stderr)
        return 1
    holes = block_holes(files, a.holes, a.seed)
    thresholds = [float(t) for t in a.thresholds.split(",")]
    template = template_for(Path(choice.path).stem)
    port = 18000 + random.Random().randrange(2000)
    # SIGTERM ends the run through ``finally`` below, so the engine child goes with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sidecar.backends.engine_launcher",
            "--model",
            str(choice.path),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--logits_all",
            "False",
            "--n_threads",
            str(default_threads()),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/v1"
    records = []
    try:
        with httpx.Client(timeout=120) as client:
            for _ in range(240):
                try:
                    if client.get(f"{base}/models").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
            for i, h in enumerate(holes):
                pre, suf = h["document"][: h["offset"]], h["document"][h["offset"] :]
                prompt = template.render(pre[-2000:], suf[:1000]) if template else pre[-2000:]
                r = client.post(
                    f"{base}/completions",
                    json={
                        "prompt": prompt,
                        "max_tokens": 64,
                        "temperature": 0,
                        "repeat_penalty": 1.0,
                        "logprobs": 1,
                        "stop": list(template.stops) if template else [],
                        "stream": False,
                    },
                )
                r.raise_for_status()
                lp = r.json()["choices"][0].get("logprobs") or {}
                toks = list(zip(lp.get("tokens") or [], lp.get("token_logprobs") or []))
                records.append({**{k: v for k, v in h.items() if k != "document"}, "tokens": toks})
                print(f"[cut_fit] {i + 1}/{len(holes)}", file=sys.stderr, flush=True)
    finally:
        proc.terminate()
        proc.wait(10)
    if not any(r["tokens"] for r in records):
        print("cut_fit: the engine answered nothing", file=sys.stderr)
        return 1
    by_hole = {(h["file"], h["offset"]): h for h in holes}
    table = {}
    for t in [None, *thresholds]:
        rows = [judge(replay(by_hole[(r["file"], r["offset"])], r["tokens"], t), r["truth"]) for r in records]
        table["off" if t is None else str(t)] = summarize(rows)
    cols = ("holes", "multi_line", "all_right", "first_right_rest_wrong", "right_lines_per_hole")
    print(f"confidence cut on {len(holes)} block holes of the {a.half} half ({choice.name}); truth = {LINES} lines")
    print(f"{'cut':<8}" + "".join(f"{c:>24}" for c in cols))
    for k, v in table.items():
        print(f"{k:<8}" + "".join(f"{v[c]:>24}" for c in cols))
    best = max(thresholds, key=lambda t: (table[str(t)]["all_right"], table[str(t)]["right_lines_per_hole"]))
    print(f"best on this half: {best} (most all-right suggestions, then right lines per hole)")
    Path(a.out).write_text(
        json.dumps({"half": a.half, "model": choice.name, "table": table, "best": best, "records": records}, indent=1),
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
