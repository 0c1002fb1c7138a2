"""``python -m devtools.bench``: command line and entry point of the keystroke-replay benchmark.

``python -m devtools.bench`` (or ``python -m devtools.bench``) ``[--out DIR] [--seed N] [--files F ...]
[--keystrokes N] [--modes sidecar,sidecar-noprefetch,naive] [--backend simulated|siliconflow]
[--timeline-mode MODE]`` types about N keys of each file, once per mode, prints one table
(a column per mode) and writes ``bench.json``, ``latency_cdf.png`` and ``timeline.png``
into DIR.

The backend is the simulator unless ``--backend siliconflow`` is given *and*
``SILICONFLOW_API_KEY`` is set (exit 2 otherwise): the bench never spends a user's quota
by default.

There is no ``--speed``: scaling the typist and the simulated backend together would
not scale the sidecar's own clock (its debounce floor and ceiling, first-line deadline
and cadence window are fixed milliseconds), so a faster replay would measure a
different product. The latency knobs (``--ttft-ms`` ...) change the backend only.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sidecar.tools.demo.runner import language_id

from .replay import BACKENDS, DEFAULT_MODES, MODE_SPECS, RunOptions, run_modes, siliconflow_key
from .report import build_timeline, compare, format_table, plot_cdf, plot_timeline, summarize, table_json, write_json
from .typist import FilePlan, TypistModel, plan_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bench"
DEFAULT_FILES = ("job_queue.py", "ttlCache.ts")
DEFAULT_KEYSTROKES = 350
DEFAULT_LATENCY = {"ttft_ms": 400.0, "ttft_jitter": 0.3, "tokens_per_s": 50.0}
DEFAULT_WRONG_RATE = 0.25
NO_KEY_MESSAGE = (
    "python -m devtools.bench: --backend siliconflow runs against the real SiliconFlow API and needs "
    "SILICONFLOW_API_KEY in the environment, which is not set; refusing to run. "
    "Without --backend the bench uses its simulated backend."
)


def default_files() -> list[Path]:
    return [FIXTURES / name for name in DEFAULT_FILES]


@dataclass
class BenchResult:
    """What one benchmark produced. ``summaries`` maps mode to the table's numbers."""

    summaries: dict[str, dict[str, Any]]
    raws: dict[str, dict[str, Any]]
    table: str
    json_path: Path
    png_path: Path | None  # latency_cdf.png
    wall_s: float
    plans: list[FilePlan] = field(default_factory=list)
    timeline: dict[str, Any] | None = None  # the session of the timeline (also in the JSON)
    timeline_path: Path | None = None  # timeline.png
    notes: list[str] = field(default_factory=list)  # e.g. why there is no plot


def _real_backend() -> dict[str, Any]:
    """Where a ``siliconflow`` run goes (never the key): base URL and model as the
    sidecar will resolve them from the user's environment."""
    import os

    from sidecar import config

    env = {
        k: os.environ[k]
        for k in (
            "SILICONFLOW_API_KEY",
            "SIDECAR_BASE_URL",
            "SIDECAR_MODEL",
            "SIDECAR_SILICONFLOW_REGION",
            "SIDECAR_FIM",
        )
        if os.environ.get(k, "").strip()
    }
    try:
        s = config.build(config.from_env({**env, "SIDECAR_PROVIDER": "siliconflow", "SIDECAR_MODE": "cloud"}))
        return {"base_url": s.resolved_base_url, "model": s.resolved_model, "fim": s.fim}
    except config.ConfigError as exc:
        return {"error": str(exc)}


def _local_backend(settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The model a ``local`` run's managed engine loads, as the sidecar resolves it: the
    ``--set`` settings first (``local_model``, ``local_model_path``), then the user's
    environment; ``auto`` by this machine's measured speeds (the run's servers get a copy
    of the speed cache, :func:`devtools.bench.replay.seed_speed_cache`)."""
    import os

    from sidecar.models.select import choose

    settings = settings or {}
    name = settings.get("local_model") or os.environ.get("SIDECAR_LOCAL_MODEL") or None
    path = settings.get("local_model_path") or os.environ.get("SIDECAR_LOCAL_MODEL_PATH") or None
    try:
        c = choose(str(name) if name else None, str(path) if path else None)
        return {
            "engine": "managed (llama-cpp-python)",
            "model": str(getattr(c, "name", "") or ""),
            "path": str(getattr(c, "path", "") or ""),
        }
    except Exception as exc:  # noqa: BLE001 - described, not fatal: the run reports its own errors
        return {"error": str(exc)}


def _backend_info(backend: str, settings: dict[str, Any] | None = None) -> dict[str, Any]:
    return _local_backend(settings) if backend == "local" else _real_backend()


def _describe_setup(opts: RunOptions, typist: TypistModel, plans: list[FilePlan], modes: list[str]) -> dict[str, Any]:
    sim = opts.backend == "simulated"
    return {
        "modes": {m: asdict(MODE_SPECS[m]) for m in modes},
        "backend": opts.backend,
        "real_backend": None if sim else _backend_info(opts.backend, opts.settings),
        "seed": opts.seed,
        "latency": opts.latency if sim else None,
        "wrong_rate": opts.wrong_rate if sim else None,
        "warmup_s": opts.warmup_s,
        "grace_s": opts.grace_s,
        "cancel": opts.cancel,
        "sidecar_settings": opts.settings,
        "typist": asdict(typist),
        "files": [
            {
                "path": p.path,
                "language": p.language,
                "first_line": p.first_line,
                "last_line": p.last_line,
                "keys": len(p.keys),
                "pauses": p.pause_count,
                "typing_time_s": round(p.typing_time_s, 2),
            }
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
    backend: str = "simulated",
    timeline_mode: str | None = None,
    timeline_file: int = 0,
    workspace: str | None = None,
) -> BenchResult:
    """Run the benchmark and write ``bench.json`` (and ``latency_cdf.png``,
    ``timeline.png``) into ``out_dir``.

    ``keystrokes`` is per file; ``latency`` holds ``LatencyModel`` keys (default: TTFT
    median 400 ms, log-normal sigma 0.3, 50 tokens/s). ``backend`` is ``simulated`` or
    ``siliconflow`` (the real API: needs ``SILICONFLOW_API_KEY``; ``latency`` and
    ``wrong_rate`` do not apply). The timeline is file ``timeline_file`` of
    ``timeline_mode`` (default: the first mode). ``workspace`` is the folder sent at
    ``initialize`` (default: the first file's folder): a large one makes the workspace
    index build while the typing runs. Raises ValueError on bad arguments.
    """
    if workspace is not None and not Path(workspace).is_dir():
        raise ValueError(f"--workspace {workspace} is not a folder")
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend == "siliconflow" and siliconflow_key() is None:
        raise ValueError(NO_KEY_MESSAGE)
    for m in modes:
        if m not in MODE_SPECS:
            raise ValueError(f"unknown mode {m!r}; choose from {', '.join(MODE_SPECS)}")
    if len(set(modes)) != len(modes):
        raise ValueError(f"a mode is listed twice: {', '.join(modes)}")
    if not modes:
        raise ValueError("no modes to run")
    timeline_mode = timeline_mode or modes[0]
    if timeline_mode not in modes:
        raise ValueError(f"--timeline-mode {timeline_mode} is not one of the modes run ({', '.join(modes)})")
    typist = typist or TypistModel()
    paths = [Path(f) for f in (files or default_files())]
    plans = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        plans.append(plan_file(path, text, language_id(path), keystrokes, seed, typist))
    if not 0 <= timeline_file < len(plans):
        raise ValueError(f"timeline file index {timeline_file} is out of range (0-{len(plans) - 1})")
    opts = RunOptions(
        seed=seed,
        wrong_rate=wrong_rate,
        grace_s=grace_s,
        warmup_s=warmup_s,
        cancel=cancel,
        settings=dict(settings or {}),
        backend=backend,
        workspace=workspace,
    )
    if latency:
        opts.latency = {**opts.latency, **latency}
    out = Path(out_dir)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sidecar-bench-") as tmp:
        raws = await run_modes(list(modes), plans, opts, Path(tmp), progress)
    wall = time.monotonic() - t0
    summaries = compare({m: summarize(r) for m, r in raws.items()})
    table = format_table(summaries)
    if backend == "simulated":
        lat = opts.latency
        title = (
            f"keystroke replay, seed {seed}: TTFT median {lat['ttft_ms']:g} ms "
            f"(sigma {lat.get('ttft_jitter', 0):g}), {lat['tokens_per_s']:g} tokens/s"
        )
    elif backend == "local":
        title = f"keystroke replay, seed {seed}: local engine, {_local_backend(opts.settings).get('model', '')}"
    else:
        real = _real_backend()
        title = f"keystroke replay, seed {seed}: SiliconFlow {real.get('model', '')} at {real.get('base_url', '')}"
    timeline = build_timeline(raws[timeline_mode], timeline_file)
    json_path = out / "bench.json"
    write_json(
        json_path,
        {
            "setup": _describe_setup(opts, typist, plans, list(modes)),
            "wall_s": round(wall, 2),
            "table": table_json(summaries),
            "table_text": table,
            "summaries": summaries,
            "timeline": timeline,
            "runs": raws,
        },
    )
    notes: list[str] = []
    png_path = timeline_path = None
    if plot:
        png_path, timeline_path, note = write_plots(out, raws, timeline, title)
        if note:
            notes.append(note)
            if progress is not None:
                progress(note)
    return BenchResult(summaries, raws, table, json_path, png_path, wall, plans, timeline, timeline_path, notes)


def write_plots(
    out: Path, raws: dict[str, dict[str, Any]], timeline: dict[str, Any] | None, title: str
) -> tuple[Path | None, Path | None, str | None]:
    """``latency_cdf.png`` and (when there is a session to draw) ``timeline.png`` in
    ``out``. Without matplotlib: no files, and a note saying so."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        return None, None, "matplotlib is not installed (pip install -e '.[bench]'): no plots"
    cdf = out / "latency_cdf.png"
    plot_cdf(cdf, raws, title)
    tl = None
    if timeline is not None:
        tl = out / "timeline.png"
        plot_timeline(tl, timeline, title)
    return cdf, tl, None


_EPILOG = """\
what it does:
  A seeded typist writes part of real source files (default: fixtures/bench/job_queue.py
  and ttlCache.ts) into a live `sidecar serve` over stdio, as VS Code drives it: one
  didChange and one inline completion request per key, the previous request cancelled.
  At pauses it accepts suggestions that match the file's true continuation. The same
  plan runs once per mode: sidecar (adaptive scheduling, speculative prefetch on),
  sidecar-noprefetch, and naive (a request per keystroke, no debounce/cancel/cache).

output:
  A table on stdout (a column per mode: time to suggestion at pauses and after accepts,
  valid suggestions at pauses, upstream requests per 100 keystrokes, streams aborted,
  tokens per accepted character, LSP requests left unanswered, prefetch hit rate and
  cost). In --out: bench.json (setup, table, summaries, the timeline's events and every
  run's raw records), latency_cdf.png (time-to-suggestion CDFs) and timeline.png (one
  session: key presses, accepts, pauses, suggestions shown, upstream streams from
  request to end, aborted ones marked at their disconnect). The plots need matplotlib
  (pip install -e '.[bench]'); without it they are skipped.

backends:
  simulated (default)  a simulated SiliconFlow-like backend per run that answers the
                       true continuation (--wrong-rate of them wrong), with the latency
                       model of --ttft-ms, --ttft-jitter, --tokens-per-s.
  siliconflow          the real SiliconFlow API with your SILICONFLOW_API_KEY (and
                       SIDECAR_BASE_URL, SIDECAR_MODEL, SIDECAR_SILICONFLOW_REGION when
                       set). It spends your quota: the naive mode sends up to one request
                       per key (try --modes sidecar,sidecar-noprefetch --keystrokes 100).
                       Acceptance still compares suggestions with the true file; upstream
                       requests and aborts come from the sidecar's own counters, and what
                       only the simulator sees (tokens generated, per-request upstream
                       bars in the timeline) shows as "-" or is left out.
  local                the sidecar's managed engine on this machine with the model
                       SIDECAR_LOCAL_MODEL names (default auto: the installed code model),
                       typing at the same human pace; upstream figures as for siliconflow.
  Without --backend siliconflow the bench never contacts SiliconFlow; with it and no key
  it exits with status 2.

exit status: 0 done, 1 a run reported errors, 2 bad arguments (or no key).
"""

SIM_ONLY = ("ttft_ms", "ttft_jitter", "tokens_per_s", "wrong_rate")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.bench",
        description="Keystroke-replay benchmark: the sidecar's scheduling with and without speculative\n"
        "prefetch against a naive request-per-keystroke baseline, on a simulated\n"
        "SiliconFlow-like backend (or, with --backend siliconflow and a key, the real one).\n"
        "About 5 minutes with the defaults.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", default="bench-results", help="output directory (default bench-results/)")
    p.add_argument("--seed", type=int, default=0, help="seed of the typist, the backend and its mistakes (default 0)")
    p.add_argument(
        "--files",
        nargs="+",
        default=None,
        help="source files to type (default: fixtures/bench/job_queue.py and ttlCache.ts for the simulated "
        "and siliconflow backends; for --backend local, the files of --corpus)",
    )
    p.add_argument(
        "--corpus",
        default="report",
        choices=("report", "tune", "all"),
        help="with --backend local and no --files: the half of the real-code corpus to type "
        "(devtools/bench/corpus.py; default report, the half published figures come from)",
    )
    p.add_argument(
        "--keystrokes",
        type=int,
        default=DEFAULT_KEYSTROKES,
        help=f"keys to type per file (default {DEFAULT_KEYSTROKES})",
    )
    p.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help="comma-separated runs, in order, from: sidecar (prefetch on), sidecar-noprefetch "
        f"(SIDECAR_PREFETCH=false), naive (default {','.join(DEFAULT_MODES)})",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="simulated",
        help="simulated (default); siliconflow: the real API, only with SILICONFLOW_API_KEY set; "
        "local: the managed engine with SIDECAR_LOCAL_MODEL (default: the installed code model)",
    )
    p.add_argument(
        "--ttft-ms",
        type=float,
        default=None,
        help=f"simulated backend: median time to first token (default {DEFAULT_LATENCY['ttft_ms']:g})",
    )
    p.add_argument(
        "--ttft-jitter",
        type=float,
        default=None,
        help=f"simulated backend: log-normal sigma of the TTFT (default {DEFAULT_LATENCY['ttft_jitter']:g})",
    )
    p.add_argument(
        "--tokens-per-s",
        type=float,
        default=None,
        help=f"simulated backend: decoding speed (default {DEFAULT_LATENCY['tokens_per_s']:g})",
    )
    p.add_argument(
        "--wrong-rate",
        type=float,
        default=None,
        help=f"simulated backend: share of answers that are plausible but wrong (default {DEFAULT_WRONG_RATE:g})",
    )
    p.add_argument(
        "--cancel",
        choices=("before", "after", "never"),
        default="before",
        help="in the sidecar runs, send $/cancelRequest for the previous unanswered request "
        "before the new request (VS Code's order, the default), just after it, or never; "
        "the naive run never cancels",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a sidecar setting for every run, written to its config file "
        "(e.g. --set debounce_max_ms=100; prefetch_enabled is set by the mode); repeatable",
    )
    p.add_argument(
        "--timeline-mode",
        default=None,
        metavar="MODE",
        help="the run whose session timeline.png shows (default: the first of --modes)",
    )
    p.add_argument(
        "--timeline-file",
        type=int,
        default=1,
        metavar="N",
        help="which file of that run the timeline shows, from 1 (default 1)",
    )
    p.add_argument("--no-plot", action="store_true", help="skip the PNGs (the JSON still has the timeline)")
    p.add_argument(
        "--workspace",
        default=None,
        metavar="DIR",
        help="the workspace folder sent at initialize (default: the first file's folder); a large one "
        "measures typing while the workspace index builds",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] == "quality":  # the quality benchmark has its own parser (devtools/bench/quality.py)
        from .quality import main as quality_main

        return quality_main(argv[1:])
    if argv and argv[0] == "team":  # a team on one shared engine (devtools/bench/team.py)
        from .team import main as team_main

        return team_main(argv[1:])
    if argv and argv[0] == "crossfile":  # cross-file quality on whole projects (devtools/bench/crossfile.py)
        from .crossfile import main as crossfile_main

        return crossfile_main(argv[1:])
    if argv and argv[0] == "crossfile_recall":  # the cross-file name in the prompt, no model
        from .crossfile_recall import main as recall_main

        return recall_main(argv[1:])
    if argv and argv[0] == "corpus":  # the real-code corpus (devtools/bench/corpus.py)
        from .corpus import main as corpus_main

        return corpus_main(argv[1:])
    args = _parser().parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.backend == "siliconflow" and siliconflow_key() is None:
        print(NO_KEY_MESSAGE, file=sys.stderr)
        return 2
    if args.backend != "simulated":
        given = ["--" + k.replace("_", "-") for k in SIM_ONLY if getattr(args, k) is not None]
        if given:
            print(
                f"python -m devtools.bench: {', '.join(given)} set(s) the simulated backend and does not apply to "
                f"--backend {args.backend}",
                file=sys.stderr,
            )
            return 2
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
    if args.files:
        files = list(args.files)
    elif args.backend == "local":
        from .corpus import CorpusError, corpus_files

        try:
            files = [str(f.path) for f in corpus_files(args.corpus)]
        except CorpusError as exc:
            print(f"python -m devtools.bench: the real-code corpus cannot be used: {exc}", file=sys.stderr)
            return 1
    else:
        files = [str(p) for p in default_files()]
    missing = [f for f in files if not Path(f).is_file()]
    if missing:
        print(f"no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.timeline_mode is not None and args.timeline_mode not in modes:
        print(f"--timeline-mode {args.timeline_mode} is not one of the modes run ({', '.join(modes)})", file=sys.stderr)
        return 2
    if not 1 <= args.timeline_file <= len(files):
        print(f"--timeline-file must be between 1 and {len(files)}", file=sys.stderr)
        return 2
    latency = {k: getattr(args, k) if getattr(args, k) is not None else v for k, v in DEFAULT_LATENCY.items()}
    wrong_rate = DEFAULT_WRONG_RATE if args.wrong_rate is None else args.wrong_rate

    def progress(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    if args.backend == "siliconflow":
        real = _real_backend()
        naive = "naive" in modes
        progress(
            f"running against the real SiliconFlow ({real.get('model')} at {real.get('base_url')}) with "
            f"your key: {len(modes)} run(s) of {len(files)} file(s) x ~{args.keystrokes} keys"
            + (", the naive run sends up to one request per key" if naive else "")
        )
    try:
        result = asyncio.run(
            run_bench(
                files,
                keystrokes=args.keystrokes,
                seed=args.seed,
                modes=modes,
                out_dir=args.out,
                latency=latency,
                wrong_rate=wrong_rate,
                cancel=args.cancel,
                settings=settings,
                plot=not args.no_plot,
                progress=progress,
                backend=args.backend,
                timeline_mode=args.timeline_mode,
                timeline_file=args.timeline_file - 1,
                workspace=args.workspace,
            )
        )
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    if args.backend == "simulated":
        lat = (
            f"TTFT median {latency['ttft_ms']:g} ms (sigma {latency['ttft_jitter']:g}), "
            f"{latency['tokens_per_s']:g} tokens/s"
        )
        where = f"simulated backend {lat}, {100 * wrong_rate:g}% wrong answers"
    elif args.backend == "local":
        where = f"local engine, {_local_backend(settings).get('model')}"
    else:
        real = _real_backend()
        where = f"SiliconFlow {real.get('model')} at {real.get('base_url')}"
    print(
        f"keystroke replay: {len(files)} file(s), seed {args.seed}, {where}"
        + (f", sidecar cancel order: {args.cancel}" if args.cancel != "before" else "")
        + (f", settings {settings}" if settings else "")
    )
    print(result.table)
    if args.backend != "simulated":
        print(
            "real backend: upstream requests and aborts are the sidecar's own counters (sidecar.stats); "
            "rows shown '-' need the simulator's records (or a server token counter)"
        )
    for mode, s in result.summaries.items():
        print(
            f"{mode}: {s['keystrokes']} keystrokes ({s['keys_typed']} typed, {s['accepted']} accepts), "
            f"typing wall time {s['wall_s']:.1f} s"
        )
    print(f"total wall time {result.wall_s:.1f} s")
    errors = {m: r["errors"] for m, r in result.raws.items() if r["errors"]}
    for mode, errs in errors.items():
        for e in errs:
            print(f"{mode}: ERROR {e}")
    for note in result.notes:
        print(note)
    written = [p for p in (result.json_path, result.png_path, result.timeline_path) if p is not None]
    print("wrote " + ", ".join(str(p) for p in written))
    return 1 if errors else 0
