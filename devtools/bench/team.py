"""``python -m devtools.bench team``: a team of developers on one shared engine.

``python -m devtools.bench team [--developers 1,5,10,20,40] [--modes sidecar,naive] [--keystrokes 120]
[--seed 0] [--capacity 8] [--prefill-tps 2000] [--decode-tps 50] [--rpm N] [--tpm N]
[--out DIR]``: for every N and mode, N simulated developers type at the same time, each
into its own real ``sidecar serve`` process over stdio, each a different real file
(``fixtures/bench``, ``fixtures/demo``, ``fixtures/quality``; past eight developers the
files repeat with another region and timing), with the keystroke-replay bench's human
typing model, pause detection and acceptance (:mod:`devtools.bench.replay`,
:mod:`devtools.bench.typist`). All of them talk to ONE simulated shared engine
(:mod:`devtools.simulator.shared_engine`, run by :mod:`devtools.bench.team_engine` in its
own process, fresh for every N and mode) that answers the files' true continuations
(25% plausibly wrong).

Figures per N and mode (every developer's pauses pooled):

- **TTS p50/p90** (ms): time to suggestion at pauses, over the pauses that showed a
  suggestion (the replay bench's definition: from the last key before the pause to the
  first answer with text for the current document, within the pause).
- **p90 KM** (ms): the p90 time to suggestion estimated over *all* pauses with the
  Kaplan-Meier estimator: a pause that showed nothing is a right-censored observation
  at its end (the suggestion would have come later, if at all). The typist's pause
  lengths do not depend on the engine, so censoring is independent, as the estimator
  needs. ``>X`` when fewer than 90% of the estimated distribution lies within the
  longest pause ``X``. The plain p90 above is blind to overload: it only sees the
  suggestions that made it within their pause (a line-end pause lasts about 0.6 s), so
  it stays low while fewer and fewer pauses show anything. **This is the SLA figure.**
- **p90 all** (ms): the nearest-rank p90 over all pauses, a pause that showed nothing
  counted as slower than any (``inf`` when fewer than 90% of pauses showed one): the
  strictest reading.
- **valid**: pauses that showed a suggestion for the current document / pauses;
  **correct**: those whose suggestion was the file's true continuation / pauses.
- **util**: engine utilisation, busy sequence-seconds / capacity / wall; **queue
  p50/p90** (ms): queue time of the engine's sequences.
- **prefill/char**, **gen/char**: prompt tokens the engine computed (its prefix cache
  missed) and tokens it generated, per accepted character.
- **429s**: answers 429 the sidecars received (the engine's RPM/TPM limits).
- **client side**: this machine runs every sidecar, every typist (one event loop in the
  bench process) and the engine. ``load`` is the highest 1-minute load average seen
  while typing, ``cpu`` the share of all cores busy (``/proc/stat``), ``bench`` the
  bench process's own CPU (1.0 = its one core saturated), ``late p90`` how late the
  typists' key presses were (ms), ``eng late`` how late the engine's own timers fired
  (p90, ms; the engine process shares the cores too): when these are high the latency
  figures include the machine's own queueing, not only the modelled engine's.

The **SLA** line gives, per mode, the largest N of the run such that it and every smaller
N keep the p90 KM time-to-suggestion under 1.5 s (and the same for the plain p90 and
"p90 all", for comparison).

Output: the table on stdout, ``team.json`` (setup, per point summaries, engine counters,
per-developer pauses) and ``team_p90.png`` (p90 vs N per mode; needs matplotlib) in
``--out``. Exit status: 0 done; 1 when a point saw no pauses or no suggestions, or a
developer's run failed; 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import math
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sidecar.metrics import percentile
from sidecar.tools.demo.runner import LogTrap, default_server_command, language_id, server_environment

from ..simulator.shared_engine import EngineConfig
from . import simproc
from .replay import MODE_SPECS, ModeRun, RunOptions
from .report import write_json
from .truth import TrueFile
from .typist import FilePlan, TypistModel, plan_file

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
TEAM_FILES = (
    "bench/job_queue.py",
    "bench/ttlCache.ts",
    "demo/inventory.py",
    "quality/eventBus.ts",
    "quality/histogram.rs",
    "quality/linereader.c",
    "quality/lru.go",
    "quality/rate_limiter.py",
)
DEFAULT_DEVELOPERS = (1, 5, 10, 20, 40)
DEFAULT_MODES = ("sidecar", "naive")
DEFAULT_KEYSTROKES = 120
SLA_MS = 1500.0
START_CONCURRENCY = 4  # sidecar processes started at once (imports are CPU-bound)


def team_files() -> list[Path]:
    return [ROOT / f for f in TEAM_FILES]


def developer_plans(
    n: int, keystrokes: int, seed: int, typist: TypistModel, files: list[Path] | None = None
) -> list[FilePlan]:
    """One plan per developer: file ``i % len(files)``; a file's later developers get
    another seed (another region and timing)."""
    files = files or team_files()
    plans = []
    for i in range(n):
        path = files[i % len(files)]
        text = path.read_text(encoding="utf-8")
        plans.append(plan_file(path, text, language_id(path), keystrokes, seed + 1000 * (i // len(files)), typist))
    return plans


class _CpuMeter:
    """CPU use between :meth:`start` and :meth:`stop`: all cores (``/proc/stat``), this
    process, and given child pids (``/proc/PID/stat``); the load average sampled each
    second. Missing ``/proc`` gives ``None`` figures."""

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.loads: list[float] = []
        self._task: asyncio.Task | None = None

    @staticmethod
    def _system() -> tuple[float, float] | None:
        try:
            parts = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        except OSError:
            return None
        v = [float(x) for x in parts]
        idle = v[3] + (v[4] if len(v) > 4 else 0.0)
        return sum(v[:8]) - idle, sum(v[:8])

    def _proc(self, pid: int | str) -> float | None:
        try:
            fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (float(fields_[11]) + float(fields_[12])) / self._tick  # utime + stime, seconds

    async def _sample(self) -> None:
        while True:
            try:
                self.loads.append(os.getloadavg()[0])
            except OSError:
                pass
            await asyncio.sleep(1.0)

    def start(self, pids: dict[str, list[int]]) -> None:
        self._pids = pids
        self._t0 = time.monotonic()
        self._sys0 = self._system()
        self._p0 = {k: [self._proc(p) for p in v] for k, v in pids.items()}
        self._self0 = self._proc("self")
        self._task = asyncio.ensure_future(self._sample())

    def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
        wall = max(1e-6, time.monotonic() - self._t0)
        sys1 = self._system()
        out: dict[str, Any] = {
            "cores": os.cpu_count(),
            "wall_s": round(wall, 2),
            "load_max": max(self.loads) if self.loads else None,
            "load_mean": round(sum(self.loads) / len(self.loads), 2) if self.loads else None,
        }
        if self._sys0 and sys1 and sys1[1] > self._sys0[1]:
            out["cpu_busy_share"] = round((sys1[0] - self._sys0[0]) / (sys1[1] - self._sys0[1]), 3)
        else:
            out["cpu_busy_share"] = None
        s1 = self._proc("self")
        out["bench_process_cores"] = None if s1 is None or self._self0 is None else round((s1 - self._self0) / wall, 3)
        for k, pids in self._pids.items():
            used = 0.0
            for p, before in zip(pids, self._p0[k]):
                after = self._proc(p)
                if after is not None and before is not None:
                    used += after - before
            out[f"{k}_cores"] = round(used / wall, 3)
        return out


class TeamDeveloper(ModeRun):
    """One developer: a :class:`ModeRun` whose backend is the shared engine (started by
    the team run, not by this run), started and typed in separate steps so that all
    developers type at the same time."""

    def __init__(self, index: int, mode: str, plan: FilePlan, opts: RunOptions, workdir: Path) -> None:
        super().__init__(mode, [plan], opts, workdir / f"dev{index:02d}")
        self.index = index
        self.raw: dict[str, Any] | None = None
        self._stats: dict[str, Any] | None = None

    @property
    def pid(self) -> int | None:
        proc = getattr(self.session, "_process", None)
        return getattr(proc, "pid", None)

    async def start(self, base_url: str) -> None:
        root = Path(self.plans[0].path).resolve().parent.as_uri()
        await self.session.start(
            default_server_command(), self._server_env(base_url), root, timeout_s=self.opts.startup_timeout_s
        )

    async def type_all(self, delay_s: float) -> None:
        await asyncio.sleep(delay_s)
        t0 = started = time.monotonic()
        ended = t0
        try:
            for plan in self.plans:
                await self._type_file(plan)
            await self._wait_answers(self.opts.grace_s)
            ended = time.monotonic()
            self._stats = await self.session.server_stats()
        except Exception as exc:
            self.errors.append(f"{type(exc).__name__}: {exc}")
            ended = time.monotonic()
        self.raw = self._raw(t0, started, ended, [], self._stats, [])

    async def close(self) -> None:
        try:
            await self.session.close()
        except Exception as exc:  # pragma: no cover - reported, not hidden
            self.errors.append(f"close: {exc}")


@dataclass
class TeamOptions:
    """Settings of one team benchmark. Engine rates in tokens/s, times in ms/s as named."""

    developers: tuple[int, ...] = DEFAULT_DEVELOPERS
    modes: tuple[str, ...] = DEFAULT_MODES
    keystrokes: int = DEFAULT_KEYSTROKES
    seed: int = 0
    engine: EngineConfig = field(default_factory=EngineConfig)
    rpm: int | None = None
    tpm: int | None = None
    wrong_rate: float = 0.25
    grace_s: float = 5.0
    warmup_s: float = 1.0
    stagger_s: float = 1.0  # developers start typing spread over this many seconds
    startup_timeout_s: float = 240.0
    typist: TypistModel = field(default_factory=TypistModel)
    settings: dict[str, str] = field(default_factory=dict)


def _pctl_all(pauses: list[dict[str, Any]], q: float) -> float | None:
    """Nearest-rank percentile over all pauses, one without a suggestion as infinity."""
    xs = [p["tts_ms"] if p["tts_ms"] is not None else math.inf for p in pauses]
    v = percentile(xs, q)
    return v


def km_quantile(pauses: list[dict[str, Any]], q: float) -> tuple[float | None, float | None]:
    """Kaplan-Meier ``q``-th percentile (ms) of the time to suggestion over ``pauses``:
    a pause with ``tts_ms`` is an observed time, one without is censored at its
    ``duration_ms``. Returns ``(quantile, None)``, or ``(None, longest time seen)`` when
    the estimated survival stays above ``1 - q/100`` over the observed range (or
    ``(None, None)`` without pauses)."""
    obs = []
    for p in pauses:
        if p.get("tts_ms") is not None:
            obs.append((float(p["tts_ms"]), 0))  # events sort before censorings at a tie
        elif p.get("duration_ms") is not None:
            obs.append((float(p["duration_ms"]), 1))
    if not obs:
        return None, None
    obs.sort()
    target = 1.0 - q / 100.0
    at_risk = len(obs)
    surv = 1.0
    i = 0
    while i < len(obs):
        t = obs[i][0]
        events = censored = 0
        while i < len(obs) and obs[i][0] == t:
            if obs[i][1] == 0:
                events += 1
            else:
                censored += 1
            i += 1
        if events:
            surv *= 1.0 - events / at_risk
            if surv <= target + 1e-12:
                return t, None
        at_risk -= events + censored
    return None, obs[-1][0]


def summarize_point(
    n: int, mode: str, devs: list[TeamDeveloper], engine: dict[str, Any] | None, cpu: dict[str, Any], wall_s: float
) -> dict[str, Any]:
    """The figures of one N and mode (see the module doc)."""
    raws = [d.raw for d in devs if d.raw is not None]
    pauses = [p for r in raws for p in r["pauses"]]
    shown = [p["tts_ms"] for p in pauses if p["tts_ms"] is not None]
    accepted_chars = sum(r["accepted_chars"] for r in raws)
    keystrokes = sum(r["keystrokes"] for r in raws)
    lateness = [x for d in devs for x in d.key_lateness_ms]
    eng = engine or {}
    prefill = eng.get("prefill_tokens")
    generated = eng.get("generated_tokens")
    queue = eng.get("queue_ms") or {}
    p90_all = _pctl_all(pauses, 90)
    p90_km, p90_km_above = km_quantile(pauses, 90)
    per_dev = []
    for d in devs:
        r = d.raw or {"pauses": []}
        ts = [p["tts_ms"] for p in r["pauses"] if p["tts_ms"] is not None]
        per_dev.append(
            {
                "developer": d.index,
                "file": d.plans[0].name,
                "lines": [d.plans[0].first_line, d.plans[0].last_line],
                "pauses": len(r["pauses"]),
                "shown": len(ts),
                "tts_p90_ms": percentile(ts, 90),
                "accepted_chars": r.get("accepted_chars", 0),
                "keystrokes": r.get("keystrokes", 0),
                "pause_records": [
                    {k: q.get(k) for k in ("kind", "duration_ms", "tts_ms", "correct", "accepted")} for q in r["pauses"]
                ],
                "errors": d.errors,
            }
        )
    upstream = (eng.get("requests", 0) + eng.get("abandoned_in_queue", 0) + eng.get("rate_limited", 0)) if eng else None
    return {
        "developers": n,
        "mode": mode,
        "pauses": len(pauses),
        "pauses_shown": len(shown),
        "tts_p50_ms": percentile(shown, 50),
        "tts_p90_ms": percentile(shown, 90),
        "tts_p90_km_ms": p90_km,
        "tts_p90_km_above_ms": p90_km_above,
        "tts_p90_all_ms": None if p90_all is None or math.isinf(p90_all) else p90_all,
        "tts_p90_all_inf": p90_all is not None and math.isinf(p90_all),
        "valid_share": len(shown) / len(pauses) if pauses else None,
        "correct_share": sum(1 for p in pauses if p["correct"]) / len(pauses) if pauses else None,
        "keystrokes": keystrokes,
        "accepts": sum(r["accepts"] for r in raws),
        "accepted_chars": accepted_chars,
        "engine_utilisation": eng.get("utilisation"),
        "queue_p50_ms": queue.get("p50"),
        "queue_p90_ms": queue.get("p90"),
        "prefill_tokens": prefill,
        "generated_tokens": generated,
        "prefill_per_accepted_char": prefill / accepted_chars if accepted_chars and prefill is not None else None,
        "generated_per_accepted_char": generated / accepted_chars if accepted_chars and generated is not None else None,
        "rate_limited_429": eng.get("rate_limited"),
        "upstream_requests": upstream,
        "upstream_per_100_keys": 100.0 * upstream / keystrokes if upstream is not None and keystrokes else None,
        "key_lateness_p90_ms": percentile(lateness, 90),
        "key_lateness_max_ms": max(lateness) if lateness else None,
        "engine_timer_lateness_p90_ms": (eng.get("timer_lateness_ms") or {}).get("p90"),
        "prefill_utilisation": eng.get("prefill_utilisation"),
        "cpu": cpu,
        "wall_s": round(wall_s, 2),
        "engine": engine,
        "per_developer": per_dev,
        "errors": [f"dev{d.index:02d}: {e}" for d in devs for e in d.errors],
    }


def largest_under_sla(
    points: list[dict[str, Any]], mode: str, key: str = "tts_p90_km_ms", sla_ms: float = SLA_MS
) -> int | None:
    """The largest N of ``mode`` such that it and every smaller N have ``key`` under
    ``sla_ms`` (a point without the figure fails). None when even the smallest fails."""
    best = None
    for p in sorted((p for p in points if p["mode"] == mode), key=lambda p: p["developers"]):
        v = p.get(key)
        if v is None or not v < sla_ms or not p["pauses_shown"]:
            break
        best = p["developers"]
    return best


async def _start_engine(points_dir: Path, plans: list[FilePlan], opts: TeamOptions) -> tuple[Any, str, Any]:
    url_file = points_dir / "engine-url.txt"
    seen = set()
    files = []
    for p in plans:
        key = (p.path, p.start, p.end)
        if key not in seen:
            seen.add(key)
            files.append(TrueFile(p.name, p.text, p.start, p.end).to_dict())
    spec = {
        "files": files,
        "seed": opts.seed,
        "wrong_rate": opts.wrong_rate,
        "engine": opts.engine.to_dict(),
        "rpm": opts.rpm,
        "tpm": opts.tpm,
        "url_file": str(url_file),
    }
    spec_path = points_dir / "engine-spec.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    log = open(points_dir / "engine-stderr.log", "wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "devtools.bench.team_engine",
        str(spec_path),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=log,
        env=server_environment(None, default_command=True),
        cwd=str(ROOT.parent),  # devtools runs from a clone
    )
    deadline = time.monotonic() + 60
    while not url_file.exists():
        if proc.returncode is not None or time.monotonic() > deadline:
            await _stop_engine(proc, log)
            raise RuntimeError(f"the shared engine did not start (see {points_dir / 'engine-stderr.log'})")
        await asyncio.sleep(0.05)
    return proc, url_file.read_text().strip(), log


async def _stop_engine(proc: Any, log: Any) -> None:
    await simproc.stop(proc, log)


async def _engine_call(base_url: str, method: str, path: str) -> Any:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.request(
            method, base_url[: -len("/v1")] + path, timeout=aiohttp.ClientTimeout(total=30)
        ) as resp:
            return await resp.json()


async def run_point(
    n: int, mode: str, opts: TeamOptions, workdir: Path, progress: Callable[[str], None]
) -> dict[str, Any]:
    """N developers in ``mode`` against one fresh shared engine. Returns the summary."""
    plans = developer_plans(n, opts.keystrokes, opts.seed, opts.typist)
    point_dir = workdir / f"n{n:03d}-{mode}"
    point_dir.mkdir(parents=True, exist_ok=True)
    run_opts = RunOptions(
        seed=opts.seed,
        wrong_rate=opts.wrong_rate,
        grace_s=opts.grace_s,
        warmup_s=opts.warmup_s,
        startup_timeout_s=opts.startup_timeout_s,
        settings=dict(opts.settings),
    )
    proc, base_url, log = await _start_engine(point_dir, plans, opts)
    devs = [TeamDeveloper(i, mode, plan, run_opts, point_dir) for i, plan in enumerate(plans)]
    engine: dict[str, Any] | None = None
    cpu: dict[str, Any] = {}
    t_start = time.monotonic()
    try:
        sem = asyncio.Semaphore(START_CONCURRENCY)

        async def start(d: TeamDeveloper) -> None:
            async with sem:
                try:
                    await d.start(base_url)
                except Exception as exc:
                    d.errors.append(f"start: {type(exc).__name__}: {exc}")

        progress(f"N={n} {mode}: starting {n} sidecar process(es)")
        await asyncio.gather(*(start(d) for d in devs))
        ready = [d for d in devs if not d.errors]
        progress(
            f"N={n} {mode}: {len(ready)}/{n} started in {time.monotonic() - t_start:.1f} s; typing "
            f"~{opts.keystrokes} keys each"
        )
        await _engine_call(base_url, "POST", "/_sim/engine/reset")
        meter = _CpuMeter()
        meter.start({"sidecars": [d.pid for d in ready if d.pid], "engine": [proc.pid]})
        rng = random.Random(f"sidecar-team:{opts.seed}:{n}")
        t_type = time.monotonic()
        await asyncio.gather(*(d.type_all(rng.uniform(0, opts.stagger_s) if n > 1 else 0.0) for d in ready))
        wall = time.monotonic() - t_type
        cpu = meter.stop()
        try:
            engine = await _engine_call(base_url, "GET", "/_sim/engine")
        except Exception as exc:
            devs[0].errors.append(f"could not read the engine's counters: {exc}")
    finally:
        await asyncio.gather(*(d.close() for d in devs))
        await _stop_engine(proc, log)
    return summarize_point(n, mode, devs, engine, cpu, wall)


def _fmt(v: Any, pat: str = "{:.0f}") -> str:
    if v is None:
        return "-"
    return pat.format(v)


COLUMNS = [
    ("N", 4),
    ("mode", 8),
    ("pauses", 7),
    ("TTS p50", 8),
    ("TTS p90", 8),
    ("p90 KM", 8),
    ("p90 all", 8),
    ("valid", 6),
    ("correct", 8),
    ("util", 5),
    ("queue p50/p90", 14),
    ("prefill/ch", 11),
    ("gen/ch", 7),
    ("429s", 5),
    ("req/100k", 9),
    ("load", 5),
    ("cpu", 5),
    ("bench", 6),
    ("late p90", 9),
    ("eng late", 9),
]


def format_table(points: list[dict[str, Any]], header: str) -> str:
    """One line per N and mode (see the module doc for the columns)."""
    head = "  ".join(name.rjust(w) for name, w in COLUMNS)
    lines = [header, head, "-" * len(head)]
    for p in points:
        cpu = p.get("cpu") or {}
        p90_all = "inf" if p.get("tts_p90_all_inf") else _fmt(p.get("tts_p90_all_ms"))
        above = p.get("tts_p90_km_above_ms")
        km = f">{above:.0f}" if p.get("tts_p90_km_ms") is None and above is not None else _fmt(p.get("tts_p90_km_ms"))
        cells = [
            str(p["developers"]),
            p["mode"],
            f"{p['pauses_shown']}/{p['pauses']}",
            _fmt(p["tts_p50_ms"]),
            _fmt(p["tts_p90_ms"]),
            km,
            p90_all,
            _fmt(p["valid_share"], "{:.0%}"),
            _fmt(p["correct_share"], "{:.0%}"),
            _fmt(p["engine_utilisation"], "{:.2f}"),
            f"{_fmt(p['queue_p50_ms'])}/{_fmt(p['queue_p90_ms'])}",
            _fmt(p["prefill_per_accepted_char"], "{:.1f}"),
            _fmt(p["generated_per_accepted_char"], "{:.2f}"),
            _fmt(p["rate_limited_429"]),
            _fmt(p["upstream_per_100_keys"]),
            _fmt(cpu.get("load_max"), "{:.1f}"),
            _fmt(cpu.get("cpu_busy_share"), "{:.0%}"),
            _fmt(cpu.get("bench_process_cores"), "{:.2f}"),
            _fmt(p["key_lateness_p90_ms"]),
            _fmt(p.get("engine_timer_lateness_p90_ms")),
        ]
        lines.append("  ".join(c.rjust(w) for c, (_n, w) in zip(cells, COLUMNS)))
    return "\n".join(lines)


def plot_p90(path: Path, points: list[dict[str, Any]], title: str) -> None:
    """PNG: p90 time-to-suggestion (ms) vs N per mode, the 1.5 s SLA as a line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 8), dpi=120, sharex=True)
    modes = list(dict.fromkeys(p["mode"] for p in points))
    for mode in modes:
        ps = sorted((p for p in points if p["mode"] == mode), key=lambda p: p["developers"])
        ns = [p["developers"] for p in ps]
        line = ax.plot(
            ns,
            [p["tts_p90_km_ms"] if p["tts_p90_km_ms"] is not None else float("nan") for p in ps],
            marker="o",
            linewidth=2,
            label=f"{mode}: p90 (Kaplan-Meier, all pauses)",
        )[0]
        above = [
            (p["developers"], p["tts_p90_km_above_ms"])
            for p in ps
            if p["tts_p90_km_ms"] is None and p["tts_p90_km_above_ms"] is not None
        ]
        if above:  # p90 beyond the longest pause: drawn at that bound, pointing up
            ax.scatter(
                [a[0] for a in above],
                [a[1] for a in above],
                marker="^",
                s=60,
                color=line.get_color(),
                label=f"{mode}: p90 above the longest pause",
            )
        ax.plot(
            ns,
            [p["tts_p90_ms"] if p["tts_p90_ms"] is not None else float("nan") for p in ps],
            marker="x",
            linestyle="--",
            color=line.get_color(),
            label=f"{mode}: p90 of pauses that showed one",
        )
        ax2.plot(
            ns,
            [100 * (p["valid_share"] or 0) for p in ps],
            marker="o",
            color=line.get_color(),
            label=f"{mode}: pauses with a suggestion",
        )
        ax2.plot(
            ns,
            [100 * (p["engine_utilisation"] or 0) for p in ps],
            marker="s",
            linestyle=":",
            color=line.get_color(),
            label=f"{mode}: engine utilisation",
        )
    ax.axhline(SLA_MS, color="red", linewidth=1, label="SLA 1.5 s")
    ax.set_ylabel("time to suggestion at pauses, p90 (ms)")
    ax.set_title(title, fontsize=9)
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax2.set_xlabel("developers on one engine (N)")
    ax2.set_ylabel("%")
    ax2.set_ylim(0, 105)
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


@dataclass
class TeamResult:
    points: list[dict[str, Any]]
    sla: dict[str, dict[str, int | None]]
    table: str
    json_path: Path
    png_path: Path | None
    wall_s: float
    problems: list[str]


def describe_engine(opts: TeamOptions) -> str:
    e = opts.engine
    limits = ", ".join(f"{k.upper()} {v}" for k, v in (("rpm", opts.rpm), ("tpm", opts.tpm)) if v is not None)
    return (
        f"shared engine: capacity {e.capacity} sequences, prefill {e.prefill_tps:g} tokens/s shared, "
        f"decode {e.decode_tps:g} tokens/s per sequence alone (+{e.batch_slowdown:g} step time per extra "
        f"sequence), overhead {e.overhead_ms:g} ms, prefix cache {e.cache_tokens} tokens; "
        + (limits or "no RPM/TPM limit")
    )


async def run_team(
    opts: TeamOptions,
    out_dir: str | Path = "bench-results/team",
    plot: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TeamResult:
    """Run every N and mode, write ``team.json`` (and ``team_p90.png``) into ``out_dir``.

    Raises ValueError on bad options."""
    progress = progress or (lambda _m: None)
    if not opts.developers or any(n < 1 for n in opts.developers):
        raise ValueError("--developers takes positive numbers, e.g. 1,5,10")
    for m in opts.modes:
        if m not in MODE_SPECS:
            raise ValueError(f"unknown mode {m!r}; choose from {', '.join(MODE_SPECS)}")
    if not opts.modes or len(set(opts.modes)) != len(opts.modes):
        raise ValueError("--modes must name each mode once")
    if opts.keystrokes < 1:
        raise ValueError("--keystrokes must be at least 1")
    out = Path(out_dir)
    t0 = time.monotonic()
    trap = LogTrap()
    pygls_log = logging.getLogger("pygls")
    old_propagate = pygls_log.propagate
    pygls_log.addHandler(trap)
    pygls_log.propagate = False
    points: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="sidecar-team-") as tmp:
            for n in sorted(set(opts.developers)):
                for mode in opts.modes:
                    p = await run_point(n, mode, opts, Path(tmp), progress)
                    progress(
                        f"N={n} {mode}: p90 {_fmt(p['tts_p90_ms'])} ms, {p['pauses_shown']}/{p['pauses']} "
                        f"pauses showed one, engine utilisation {_fmt(p['engine_utilisation'], '{:.2f}')}, "
                        f"load {_fmt((p['cpu'] or {}).get('load_max'), '{:.1f}')}"
                    )
                    points.append(p)
                    write_json(out / "team.partial.json", {"points": points})  # survives an interrupted run
    finally:
        pygls_log.removeHandler(trap)
        pygls_log.propagate = old_propagate
    wall = time.monotonic() - t0
    sla = {
        m: {
            "p90_km": largest_under_sla(points, m),
            "p90_shown": largest_under_sla(points, m, "tts_p90_ms"),
            "p90_all_pauses": largest_under_sla(points, m, "tts_p90_all_ms"),
        }
        for m in opts.modes
    }
    cores = os.cpu_count()
    header = (
        f"team on one engine, seed {opts.seed}, ~{opts.keystrokes} keys per developer; {describe_engine(opts)}\n"
        f"client side: every sidecar process, every typist and the engine share this machine's {cores} CPU "
        f"cores; load/cpu/bench/late p90/eng late show how saturated it was (latencies then include the "
        f"machine's own queueing)"
    )
    table = format_table(points, header)
    problems = []
    for p in points:
        if not p["pauses"]:
            problems.append(f"N={p['developers']} {p['mode']}: the run saw no pauses")
        elif not p["pauses_shown"]:
            problems.append(f"N={p['developers']} {p['mode']}: no pause showed a suggestion")
        problems.extend(f"N={p['developers']} {p['mode']}: {e}" for e in p["errors"])
    json_path = out / "team.json"
    write_json(
        json_path,
        {
            "setup": {
                "developers": list(opts.developers),
                "modes": list(opts.modes),
                "keystrokes": opts.keystrokes,
                "seed": opts.seed,
                "engine": opts.engine.to_dict(),
                "rpm": opts.rpm,
                "tpm": opts.tpm,
                "wrong_rate": opts.wrong_rate,
                "grace_s": opts.grace_s,
                "warmup_s": opts.warmup_s,
                "stagger_s": opts.stagger_s,
                "typist": asdict(opts.typist),
                "settings": opts.settings,
                "files": [str(f.relative_to(ROOT.parent)) for f in team_files()],
                "cpu_count": cores,
                "sla_ms": SLA_MS,
                "modes_spec": {m: asdict(MODE_SPECS[m]) for m in opts.modes},
            },
            "wall_s": round(wall, 2),
            "table_text": table,
            "sla": sla,
            "points": points,
            "client_warnings": trap.messages,
            "problems": problems,
        },
    )
    png = None
    if plot:
        try:
            importlib.import_module("matplotlib")
        except ImportError:
            progress("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        else:
            png = out / "team_p90.png"
            plot_p90(png, points, f"{describe_engine(opts)}\n(client side on {cores} cores)")
    return TeamResult(points, sla, table, json_path, png, wall, problems)


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.bench team",
        description="N developers, each a real sidecar process typing a different real file with the human "
        "typing model, on ONE simulated shared engine (slots, queue, prefix cache, batched "
        "decoding, optional RPM/TPM limits); the sidecar against the naive mode.",
        epilog="The figures are defined in devtools/bench/team.py, the engine model in "
        "devtools/simulator/shared_engine.py. Exit status: 0 done, 1 a point saw no pauses or no "
        "suggestions (or a developer's run failed), 2 bad arguments.",
    )
    p.add_argument(
        "--developers",
        default=",".join(map(str, DEFAULT_DEVELOPERS)),
        help=f"comma-separated team sizes N (default {','.join(map(str, DEFAULT_DEVELOPERS))})",
    )
    p.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated modes from {', '.join(MODE_SPECS)} (default {','.join(DEFAULT_MODES)})",
    )
    p.add_argument(
        "--keystrokes",
        type=int,
        default=DEFAULT_KEYSTROKES,
        help=f"keys each developer types (default {DEFAULT_KEYSTROKES}; short, as the client side "
        "shares this machine's cores)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the typists and the engine's mistakes (default 0)")
    d = EngineConfig()
    p.add_argument("--capacity", type=int, default=d.capacity, help=f"engine slots (default {d.capacity})")
    p.add_argument(
        "--prefill-tps",
        type=float,
        default=d.prefill_tps,
        help=f"shared prefill speed, tokens/s (default {d.prefill_tps:g})",
    )
    p.add_argument(
        "--decode-tps",
        type=float,
        default=d.decode_tps,
        help=f"decode speed of one sequence alone, tokens/s (default {d.decode_tps:g})",
    )
    p.add_argument(
        "--batch-slowdown",
        type=float,
        default=d.batch_slowdown,
        help=f"extra step time per extra sequence, fraction (default {d.batch_slowdown:g})",
    )
    p.add_argument(
        "--overhead-ms", type=float, default=d.overhead_ms, help=f"per-request overhead, ms (default {d.overhead_ms:g})"
    )
    p.add_argument("--rpm", type=int, default=None, help="engine-wide requests per minute, 429 beyond (default none)")
    p.add_argument("--tpm", type=int, default=None, help="engine-wide tokens per minute, 429 beyond (default none)")
    p.add_argument("--wrong-rate", type=float, default=0.25, help="share of plausible wrong answers (default 0.25)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a sidecar setting for every developer (config file); repeatable",
    )
    p.add_argument("--out", default="bench-results/team", help="output directory (default bench-results/team)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        developers = _ints(args.developers)
        engine = EngineConfig(
            capacity=args.capacity,
            prefill_tps=args.prefill_tps,
            decode_tps=args.decode_tps,
            batch_slowdown=args.batch_slowdown,
            overhead_ms=args.overhead_ms,
        )
        for name in ("rpm", "tpm"):
            v = getattr(args, name)
            if v is not None and v < 1:
                raise ValueError(f"--{name} must be a positive integer")
        settings = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(f"--set takes KEY=VALUE, got {item!r}")
            settings[key.strip()] = value.strip()
        opts = TeamOptions(
            developers=developers,
            modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
            keystrokes=args.keystrokes,
            seed=args.seed,
            engine=engine,
            rpm=args.rpm,
            tpm=args.tpm,
            wrong_rate=args.wrong_rate,
            settings=settings,
        )
    except ValueError as exc:
        print(f"python -m devtools.bench team: {exc}", file=sys.stderr)
        return 2

    def progress(msg: str) -> None:
        print(f"[team] {msg}", file=sys.stderr, flush=True)

    try:
        result = asyncio.run(run_team(opts, args.out, plot=not args.no_plot, progress=progress))
    except ValueError as exc:
        print(f"python -m devtools.bench team: {exc}", file=sys.stderr)
        return 2
    print(result.table)
    for mode, s in result.sla.items():
        tested = max(opts.developers)

        def say(v: int | None, tested: int = tested) -> str:
            if v is None:
                return "none (even the smallest N misses it)"
            return f"{v}" + (" (the largest N tested)" if v == tested else "")

        print(
            f"SLA p90 < 1.5 s, {mode}: largest N {say(s['p90_km'])} (p90 KM); for comparison, over pauses that "
            f"showed one {say(s['p90_shown'])}, over all pauses as inf {say(s['p90_all_pauses'])}"
        )
    total_429 = {m: sum(p["rate_limited_429"] or 0 for p in result.points if p["mode"] == m) for m in opts.modes}
    print("429s received: " + ", ".join(f"{m} {v}" for m, v in total_429.items()))
    print(f"total wall time {result.wall_s:.1f} s")
    print("wrote " + ", ".join(str(p) for p in (result.json_path, result.png_path) if p is not None))
    if result.problems:
        for line in result.problems:
            print(f"ERROR {line}", file=sys.stderr)
        print(
            "python -m devtools.bench team: some points saw no pauses or no suggestions, or a run failed (see above)",
            file=sys.stderr,
        )
        return 1
    return 0


__all__ = ["TeamOptions", "TeamResult", "developer_plans", "largest_under_sla", "main", "run_team"]
