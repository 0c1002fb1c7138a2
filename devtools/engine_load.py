"""Benchmark: the embedded engine's speed while other programs use the CPUs, with a fixed
thread count against the thread governor (sidecar/backends/engine_threads.py).

``python -m devtools.engine_load [--models smollm2-135m,qwen2.5-coder-0.5b] [--seconds 10]
[--out DIR]`` runs, for each model, each load and each mode, a fresh child process that
loads the model as the managed engine does (``use_extra_bufts`` off, weights in memory,
``n_ctx`` 2,048, decode threads :func:`sidecar.models.hardware.default_threads`, prompt
threads every CPU) and, for ``--seconds``, evaluates a prompt of 300 tokens of this
package's code then 16 greedy tokens, over and over. It prints one table and writes
``engine_load.json`` into DIR.

Loads (started before the child, stopped after it): ``quiet``; ``niced`` (one
``nice -n 19`` busy loop per CPU, as a background compile); ``busy-1`` and ``busy-2``
(one and two busy loops at normal priority, as a build or a second engine). Modes:
``fixed`` (the engine's start-up counts throughout) and ``governed`` (the governor
installed, as the launcher does).

Figures per cell: prompt evaluation ms per token (p50), decode ms per token (p50, p90,
max), and the decode threads the governor chose last. Compare only rows of one run;
the machine's CPU is printed with them. A cell that measured nothing makes the run exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

LOADS = ("quiet", "niced", "busy-1", "busy-2")
MODES = ("fixed", "governed")
PROMPT_TOKENS = 300
DECODE_TOKENS = 16


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def model_path(name: str) -> Path:
    from sidecar.models import catalog, store

    try:
        path = store.installed_path(catalog.get(name))
    except Exception as e:  # noqa: BLE001 - an unknown name: one line, not a traceback
        raise SystemExit(f"engine_load: {e}") from None
    if path is None:
        raise SystemExit(f"engine_load: model {name} is not installed (sidecar model pull {name})")
    return path


def _pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))]


def child(model: str, mode: str, seconds: float) -> dict:
    """One cell, in its own process: the figures as a dict (module doc)."""
    from sidecar.backends.engine_threads import install_thread_governor
    from sidecar.models.hardware import default_threads
    from sidecar.models.llama_safety import disable_extra_buffer_types

    disable_extra_buffer_types()
    if mode == "governed":
        install_thread_governor()
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=2048,
        n_threads=default_threads(),
        n_threads_batch=os.cpu_count() or 1,
        use_mmap=False,
        logits_all=False,
        verbose=False,
    )
    source = (Path(__file__).resolve().parents[1] / "sidecar" / "completion" / "scheduler.py").read_text()
    prefill: list[float] = []
    decode: list[float] = []
    end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < end:
        chunk = source[(i * 700) % max(1, len(source) - 3000) :][:3000]
        i += 1
        tokens = llm.tokenize(chunk.encode("utf-8"), add_bos=False)[:PROMPT_TOKENS]
        llm.reset()
        t0 = time.perf_counter()
        llm.eval(tokens)
        prefill.append((time.perf_counter() - t0) * 1000 / len(tokens))
        for _ in range(DECODE_TOKENS):
            tok = llm.sample(temp=0.0)
            t1 = time.perf_counter()
            llm.eval([tok])
            decode.append((time.perf_counter() - t1) * 1000)
    return {
        "rounds": i,
        "prefill_ms_per_token_p50": round(_pct(prefill, 0.5), 2) if prefill else None,
        "decode_ms_per_token_p50": round(_pct(decode, 0.5), 1) if decode else None,
        "decode_ms_per_token_p90": round(_pct(decode, 0.9), 1) if decode else None,
        "decode_ms_per_token_max": round(max(decode), 1) if decode else None,
        "decode_threads_last": int(llama_cpp.llama_n_threads(llm._ctx.ctx)),
    }


def start_load(load: str) -> list[subprocess.Popen]:
    spin = [sys.executable, "-c", "while True: pass"]
    if load == "niced":
        return [subprocess.Popen(["nice", "-n", "19", *spin]) for _ in range(os.cpu_count() or 1)]
    if load.startswith("busy-"):
        return [subprocess.Popen(spin) for _ in range(int(load.split("-")[1]))]
    return []


def run_cell(model: Path, load: str, mode: str, seconds: float) -> dict:
    procs = start_load(load)
    try:
        time.sleep(0.5 if procs else 0)
        out = subprocess.run(
            [sys.executable, "-m", "devtools.engine_load", "--child", str(model), mode, str(seconds)],
            capture_output=True,
            text=True,
            timeout=seconds * 6 + 120,
            check=False,
        )
    finally:
        for p in procs:
            p.kill()
            p.wait()
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m devtools.engine_load", description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="smollm2-135m,qwen2.5-coder-0.5b")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--loads", default=",".join(LOADS))
    ap.add_argument("--out", type=Path, default=Path("bench-results"))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], float(args.child[2]))))
        return 0
    loads = [x for x in args.loads.split(",") if x]
    bad = [x for x in loads if x not in LOADS]
    if bad:
        print(f"engine_load: unknown load {bad[0]!r}; known: {', '.join(LOADS)}", file=sys.stderr)
        return 2
    rows = []
    for name in [m for m in args.models.split(",") if m]:
        path = model_path(name)
        for load in loads:
            for mode in MODES:
                cell = run_cell(path, load, mode, args.seconds)
                rows.append({"model": name, "load": load, "mode": mode, **cell})
                print(_row(rows[-1]), flush=True)
    header = f"CPU: {cpu_name()}, {os.cpu_count()} CPUs; {args.seconds:g} s a cell; ms per token"
    table = "\n".join([header, _row(None), *(_row(r) for r in rows)])
    print("\n" + table)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "engine_load.json"
    path.write_text(
        json.dumps({"cpu": cpu_name(), "cpus": os.cpu_count(), "seconds": args.seconds, "rows": rows}, indent=1)
    )
    print(f"wrote {path}")
    empty = [r for r in rows if r.get("error") or not r.get("decode_ms_per_token_p50")]
    if empty:
        print(f"engine_load: {len(empty)} cell(s) measured nothing: {empty[0]}", file=sys.stderr)
        return 1
    return 0


def _row(r: dict | None) -> str:
    if r is None:
        cols = ("model", "load", "mode", "prompt p50", "decode p50", "p90", "max", "threads")
    elif r.get("error"):
        cols = (r["model"], r["load"], r["mode"], "error: " + r["error"][:60], "", "", "", "")
    else:
        cols = (
            r["model"],
            r["load"],
            r["mode"],
            r["prefill_ms_per_token_p50"],
            r["decode_ms_per_token_p50"],
            r["decode_ms_per_token_p90"],
            r["decode_ms_per_token_max"],
            r["decode_threads_last"],
        )
    return " | ".join(f"{c!s:>20}" if i == 0 else f"{c!s:>10}" for i, c in enumerate(cols))


if __name__ == "__main__":
    sys.exit(main())
