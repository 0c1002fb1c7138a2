"""Command line and entry point of the keystroke-replay benchmark.

``python -m sidecar.bench [--out DIR] [--seed N] [--files F ...] [--keystrokes N]
[--modes sidecar,sidecar-noprefetch,naive]`` types about N keys of each file, once per
mode, prints one table (a column per mode) and writes ``bench.json`` and
``latency_cdf.png`` into DIR.

There is no ``--speed``: scaling the typist and the simulated backend together would
not scale the sidecar's own clock (its debounce floor and ceiling, first-line deadline
and cadence window are fixed milliseconds), so a faster replay would measure a
different product. The latency knobs (``--ttft-ms`` ...) change the backend only.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..demo.runner import language_id
from .replay import DEFAULT_MODES, MODE_SPECS, RunOptions, run_modes
from .report import compare, format_table, plot_cdf, summarize, table_json, write_json
from .typist import FilePlan, TypistModel, plan_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
DEFAULT_FILES = ("job_queue.py", "ttlCache.ts")
DEFAULT_KEYSTROKES = 350


def default_files() -> list[Path]:
    return [FIXTURES / name for name in DEFAULT_FILES]


@dataclass
class BenchResult:
    """What one benchmark produced. ``summaries`` maps mode to the table's numbers."""

    summaries: dict[str, dict[str, Any]]
    raws: dict[str, dict[str, Any]]
    table: str
    json_path: Path
    png_path: Path | None
    wall_s: float
    plans: list[FilePlan] = field(default_factory=list)


def _describe_setup(opts: RunOptions, typist: TypistModel, plans: list[FilePlan],
                    modes: list[str]) -> dict[str, Any]:
    return {
        "modes": {m: asdict(MODE_SPECS[m]) for m in modes},
        "seed": opts.seed,
        "latency": opts.latency,
        "wrong_rate": opts.wrong_rate,
        "warmup_s": opts.warmup_s,
        "grace_s": opts.grace_s,
        "cancel": opts.cancel,
        "sidecar_settings": opts.settings,
        "typist": asdict(typist),
        "files": [
            {"path": p.path, "language": p.language, "first_line": p.first_line, "last_line": p.last_line,
             "keys": len(p.keys), "pauses": p.pause_count, "typing_time_s": round(p.typing_time_s, 2)}
            for p in plans
        ],
    }


async def run_bench(
    files: list[str | Path] | None = None,
    *,
    keystrokes: int = DEFAULT_KEYSTROKES,
    seed: int = 0,
    modes: list[str] | tuple[str, ...] = DEFAULT_MODES,
    out_dir: str | Path = "bench-results",
    latency: dict[str, Any] | None = None,
    wrong_rate: float = 0.25,
    typist: TypistModel | None = None,
    grace_s: float = 10.0,
    warmup_s: float = 1.0,
    cancel: str = "before",
    settings: dict[str, str] | None = None,
    plot: bool = True,
    progress: Callable[[str], None] | None = None,
) -> BenchResult:
    """Run the benchmark and write ``bench.json`` (and ``latency_cdf.png``) into ``out_dir``.

    ``keystrokes`` is per file; ``latency`` holds ``LatencyModel`` keys (default: TTFT
    median 400 ms, log-normal sigma 0.3, 50 tokens/s). Raises ValueError on bad arguments.
    """
    for m in modes:
        if m not in MODE_SPECS:
            raise ValueError(f"unknown mode {m!r}; choose from {', '.join(MODE_SPECS)}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"a mode is listed twice: {', '.join(modes)}")
    if not modes:
        raise ValueError("no modes to run")
    typist = typist or TypistModel()
    paths = [Path(f) for f in (files or default_files())]
    plans = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        plans.append(plan_file(path, text, language_id(path), keystrokes, seed, typist))
    opts = RunOptions(seed=seed, wrong_rate=wrong_rate, grace_s=grace_s, warmup_s=warmup_s, cancel=cancel,
                      settings=dict(settings or {}))
    if latency:
        opts.latency = {**opts.latency, **latency}
    out = Path(out_dir)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sidecar-bench-") as tmp:
        raws = await run_modes(list(modes), plans, opts, Path(tmp), progress)
    wall = time.monotonic() - t0
    summaries = compare({m: summarize(r) for m, r in raws.items()})
    table = format_table(summaries)
    lat = opts.latency
    title = (f"keystroke replay, seed {seed}: TTFT median {lat['ttft_ms']:g} ms "
             f"(sigma {lat.get('ttft_jitter', 0):g}), {lat['tokens_per_s']:g} tokens/s")
    json_path = out / "bench.json"
    png_path = out / "latency_cdf.png" if plot else None
    write_json(json_path, {
        "setup": _describe_setup(opts, typist, plans, list(modes)),
        "wall_s": round(wall, 2),
        "table": table_json(summaries),
        "table_text": table,
        "summaries": summaries,
        "runs": raws,
    })
    if png_path is not None:
        try:
            plot_cdf(png_path, raws, title)
        except ImportError:
            if progress is not None:
                progress("matplotlib is not installed (pip install -e '.[bench]'): no plot")
            png_path = None
    return BenchResult(summaries, raws, table, json_path, png_path, wall, plans)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/bench_replay",
        description="Keystroke-replay benchmark: the sidecar's scheduling with and without "
                    "speculative prefetch against a naive request-per-keystroke baseline, on a "
                    "simulated SiliconFlow-like backend.",
    )
    p.add_argument("--out", default="bench-results", help="output directory (default bench-results/)")
    p.add_argument("--seed", type=int, default=0, help="seed of the typist, the backend and its mistakes (default 0)")
    p.add_argument("--files", nargs="+", default=None,
                   help="source files to type (default: fixtures/bench/job_queue.py and ttlCache.ts)")
    p.add_argument("--keystrokes", type=int, default=DEFAULT_KEYSTROKES,
                   help=f"keys to type per file (default {DEFAULT_KEYSTROKES})")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help="comma-separated runs, in order, from: sidecar (prefetch on), sidecar-noprefetch "
                        f"(SIDECAR_PREFETCH=false), naive (default {','.join(DEFAULT_MODES)})")
    p.add_argument("--ttft-ms", type=float, default=400.0, help="backend median time to first token (default 400)")
    p.add_argument("--ttft-jitter", type=float, default=0.3, help="log-normal sigma of the TTFT (default 0.3)")
    p.add_argument("--tokens-per-s", type=float, default=50.0, help="backend decoding speed (default 50)")
    p.add_argument("--wrong-rate", type=float, default=0.25,
                   help="share of answers that are plausible but wrong (default 0.25)")
    p.add_argument("--cancel", choices=("before", "after", "never"), default="before",
                   help="in the sidecar runs, send $/cancelRequest for the previous unanswered request "
                        "before the new request (VS Code's order, the default), just after it, or never; "
                        "the naive run never cancels")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a sidecar setting for every run, written to its config file "
                        "(e.g. --set debounce_max_ms=100; prefetch_enabled is set by the mode); repeatable")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.keystrokes < 1:
        print("--keystrokes must be at least 1", file=sys.stderr)
        return 2
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            print(f"--set takes KEY=VALUE, got {item!r}", file=sys.stderr)
            return 2
        settings[key.strip()] = value.strip()
    files = args.files or [str(p) for p in default_files()]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        print(f"no such file: {', '.join(missing)}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    try:
        result = asyncio.run(run_bench(
            files, keystrokes=args.keystrokes, seed=args.seed, modes=modes, out_dir=args.out,
            latency={"ttft_ms": args.ttft_ms, "ttft_jitter": args.ttft_jitter, "tokens_per_s": args.tokens_per_s},
            wrong_rate=args.wrong_rate, cancel=args.cancel, settings=settings, plot=not args.no_plot,
            progress=progress,
        ))
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    lat = f"TTFT median {args.ttft_ms:g} ms (sigma {args.ttft_jitter:g}), {args.tokens_per_s:g} tokens/s"
    print(f"keystroke replay: {len(files)} file(s), seed {args.seed}, simulated backend {lat}, "
          f"{100 * args.wrong_rate:g}% wrong answers"
          + (f", sidecar cancel order: {args.cancel}" if args.cancel != "before" else "")
          + (f", settings {settings}" if settings else ""))
    print(result.table)
    for mode, s in result.summaries.items():
        print(f"{mode}: {s['keystrokes']} keystrokes ({s['keys_typed']} typed, {s['accepted']} accepts), "
              f"typing wall time {s['wall_s']:.1f} s")
    print(f"total wall time {result.wall_s:.1f} s")
    errors = {m: r["errors"] for m, r in result.raws.items() if r["errors"]}
    for mode, errs in errors.items():
        for e in errs:
            print(f"{mode}: ERROR {e}")
    print(f"wrote {result.json_path}" + (f" and {result.png_path}" if result.png_path else ""))
    return 1 if errors else 0
