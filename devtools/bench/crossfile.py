"""``python -m devtools.bench crossfile``: does the sidecar know the other files of a project?

``python -m devtools.bench crossfile [--half tune|report|all] [--projects a,b] [--seed N]
[--holes-per-file N] [--holes-per-project N] [--systems index,index-open,today,today-open,fim-client]
[--max-tokens N] [--model PATH|NAME] [--set KEY=VALUE ...] [--out DIR] [--list]`` cuts
CrossCodeEval-style holes into whole real projects (:mod:`.crossfile_holes`: the cursor
at the first use in a file of a name that another file of the project defines, the truth
the rest of that line), asks each system for the missing text once per hole, scores the
answers, prints a table (rows: metrics, overall and per project; columns: systems, in
the order of ``SYSTEMS``; the half in its title) and writes ``crossfile.json`` into
``--out`` (default: a new temporary directory, printed at the end). ``--list`` only
prints what each project gives (files, definitions, hole positions, holes made) and
needs no model.

Projects
    The packages of ``fixtures/corpus/manifest.toml`` (the same archives, SHA-256 pins and
    tune/report split as the quality benchmark) in a language with a definition finder
    (Python, JavaScript, TypeScript, Java, Go), each as its whole source tree
    (:func:`devtools.bench.corpus.package_tree`: tests, docs, examples, vendored,
    generated and minified files left out), extracted once into
    ``<corpus cache>/projects/<package key>/``. ``--projects`` picks some of the half by
    name (a package name or a unique part of one, e.g. ``commander``, ``pflag``). A
    project that gives fewer holes than ``--holes-per-project`` says so in the table
    (``holes (attrs: too few, 7 of 15)``).

Systems (columns), on the same engine and model, one after another, never at once
    ``index``
        The sidecar (``python -m sidecar serve`` over stdio LSP, a client with update
        support, scored on its final text, as the quality benchmark's ``sidecar``
        column) started with the project as its workspace (``rootUri`` and
        ``workspaceFolders`` = the project's root) and ``workspace_index = true``. Only
        F is open: ``didOpen`` at F's real ``file://`` URI with the hole's text, closed
        after the hole. Before the first hole the bench waits up to
        ``INDEX_READY_TIMEOUT_S`` (60 s) for ``sidecar.stats`` to report
        ``workspace_index.state == "ready"``; a server whose stats have no
        ``workspace_index`` gets ``INDEX_MISSING_WAIT_S`` (3 s) and a warning.
    ``index-open``
        The same, and G (the file defining the name) open too: ``didOpen`` of G's text on
        disk at its real URI before the request, closed after it.
    ``today``
        The sidecar with ``workspace_index = false``: it sees nothing of the other
        files; only F open.
    ``today-open``
        ``workspace_index = false``, G open too (today's open-files context).
    ``fim-client``
        The quality benchmark's plain FIM client (``quality.fim_body``: the model's FIM
        template around the last 2,000 characters before the cursor and the first 1,000
        after it, temperature 0, the family's stops, cut to a line on the client), on the
        engine of the last sidecar column's server of the project while it is idle (or of
        a sidecar started only to host the engine). No cross-file context at all. Not run
        for a model without a FIM template.

Every sidecar column runs with temperature 0, ``max_tokens`` as given, prefetch and the
completion cache off, in a private config and state directory (``quality.sidecar_env``);
``--set`` adds sidecar settings to every sidecar column (``workspace_index`` is the
column's own and cannot be set). Each server (one per column and project) answers one
warm-up request that is not scored (:func:`warm_up`: the first hole's file, whole, at a
URI outside the workspace), and ``fim-client`` one on each engine. Holes are asked in document order.

Metrics, per column, overall and per project (``score``, ``summarize``)
    ``name``: the suggestion starts with the name X (every character of X right) and
    the identifier ends there (``render_alls`` is no ``render_all``): count and percent. ``exact first line``: the suggestion's first line equals the truth
    (trailing whitespace ignored). ``accepted chars``: the mean length of the common
    prefix of the suggestion and the truth (code points). Also empty answers, failed
    requests, and the median time to the first answer and to the final text (ms).

Exit status: 0 done; 1 a column answered nothing (an engine that did not start, a dead
server, a report that saw nothing) or a project could not be fetched (one line says
which); 2 bad arguments or no hole could be made.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from .crossfile_holes import (
    DEFAULT_HOLES_PER_FILE,
    DEFAULT_HOLES_PER_PROJECT,
    LANGUAGES,
    CrossHole,
    Project,
    load_project,
    project_counts,
    select_holes,
    utf16_len,
)
from .quality import (
    DEFAULT_FIM_PREFIX_CHARS,
    DEFAULT_FIM_SUFFIX_CHARS,
    DEFAULT_MAX_TOKENS,
    NO_FIM_TEMPLATE,
    REQUEST_TIMEOUT_S,
    ColumnRun,
    ModelError,
    Options,
    QualityClient,
    _loadavg,
    _toml_value,
    default_model,
    fim_body,
    fim_template,
    resolve_model,
    sidecar_env,
    stream_answer,
)
from .quality_metrics import common_prefix_len, ratio_cell

SYSTEMS = ("index", "index-open", "today", "today-open", "fim-client")
DEFAULT_SYSTEMS = ("index", "index-open", "today", "fim-client")
SIDECAR_SYSTEMS = ("index", "index-open", "today", "today-open")
#: The setting each sidecar column is about (its own; ``--set`` cannot change it).
INDEX_SETTING = "workspace_index"
#: How long the bench waits for the workspace index to be ready (s).
INDEX_READY_TIMEOUT_S = 60.0
#: Without ``workspace_index`` in ``sidecar.stats``: how long the bench waits anyway (s).
INDEX_MISSING_WAIT_S = 3.0
HALF_TITLES = {"tune": "tuning half (tune)", "report": "reporting half (report)", "all": "both halves (all)"}
PROG = "python -m devtools.bench crossfile"


def opens_definer(system: str) -> bool:
    """Whether ``system`` opens G (the defining file) next to F."""
    return system.endswith("-open")


def index_on(system: str) -> bool:
    """Whether ``system`` runs the sidecar with ``workspace_index = true``."""
    return system.startswith("index")


# -- LSP client with a workspace ---------------------------------------------------------------


class CrossClient(QualityClient):
    """The quality benchmark's client (:class:`~devtools.bench.quality.QualityClient`)
    that starts the server with a workspace: ``rootUri`` and one workspace folder (the
    project's root), and answers ``workspace/workspaceFolders`` with it."""

    def __init__(self, root: Path | None) -> None:
        super().__init__()
        self.root = root

        @self.client.feature(types.WORKSPACE_WORKSPACE_FOLDERS)
        def _folders(params: Any) -> list[types.WorkspaceFolder] | None:
            return self._folders()

    def _folders(self) -> list[types.WorkspaceFolder] | None:
        if self.root is None:
            return None
        return [types.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name)]

    async def start(self, env: dict[str, str], declare_updates: bool = True, timeout_s: float = 60.0) -> None:
        """Start the server in the project's root and run the handshake (a client with
        update support when ``declare_updates``); raises on failure."""
        from .quality import ROOT

        extra = {"start_new_session": True} if os.name == "posix" else {}
        await self.client.start_io(sys.executable, "-m", "sidecar", "serve", env=env, cwd=str(ROOT), **extra)
        self._proc = getattr(self.client, "_server", None)
        if self._proc is not None and self._proc.stderr is not None:
            self._stderr_task = asyncio.ensure_future(self._drain(self._proc.stderr))
        caps = types.ClientCapabilities(
            general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
            text_document=types.TextDocumentClientCapabilities(
                synchronization=types.TextDocumentSyncClientCapabilities(dynamic_registration=False),
                inline_completion=types.InlineCompletionClientCapabilities(dynamic_registration=False),
            ),
            window=types.WindowClientCapabilities(show_message=types.ShowMessageRequestClientCapabilities()),
            workspace=types.WorkspaceClientCapabilities(configuration=False, workspace_folders=self.root is not None),
            experimental={"sidecar": {"inlineCompletionUpdate": True}} if declare_updates else None,
        )
        params = types.InitializeParams(
            process_id=os.getpid(),
            capabilities=caps,
            client_info=types.ClientInfo(name="sidecar-bench-crossfile", version="1"),
            root_uri=self.root.as_uri() if self.root is not None else None,
            root_path=str(self.root) if self.root is not None else None,
            workspace_folders=self._folders(),
            initialization_options={"inlineCompletionUpdates": True} if declare_updates else None,
        )
        await asyncio.wait_for(self.client.initialize_async(params), timeout_s)
        self.client.initialized(types.InitializedParams())

    async def workspace_index(self) -> Any:
        """``sidecar.stats``'s ``workspace_index`` (a dict with ``state``, ``files``,
        ``definitions``, ``build_s``), or None when the stats have none or did not come."""
        st = await self.stats()
        return (st or {}).get("workspace_index") if isinstance(st, dict) else None


async def wait_index(
    qc: CrossClient, want_on: bool, timeout_s: float = INDEX_READY_TIMEOUT_S
) -> tuple[Any, str | None]:
    """The server's workspace index state once it is settled, and a warning or None.

    With the index wanted (``want_on``): polls ``sidecar.stats`` every 0.25 s until
    ``workspace_index.state`` is ``ready`` (no warning), ``off`` (warning: the setting did
    not take), or ``timeout_s`` seconds passed (warning, the last state). Stats without
    ``workspace_index``: waits ``INDEX_MISSING_WAIT_S`` and warns. Without the index:
    reads the state once and warns when it is there and not ``off``."""
    t0 = time.monotonic()
    while True:
        wi = await qc.workspace_index()
        if not isinstance(wi, dict):
            if want_on:
                await asyncio.sleep(INDEX_MISSING_WAIT_S)
                return None, (
                    f"sidecar.stats has no workspace_index: waited {INDEX_MISSING_WAIT_S:g} s and went on "
                    "(the server may not have the workspace index yet)"
                )
            return None, None
        state = wi.get("state")
        if not want_on:
            return wi, None if state in ("off", None) else f"{INDEX_SETTING} = false, but the index state is {state!r}"
        if state == "ready":
            return wi, None
        if state == "off":
            return wi, f"{INDEX_SETTING} = true, but the index state is 'off'"
        if time.monotonic() - t0 >= timeout_s:
            return wi, f"the workspace index was not ready within {timeout_s:g} s (state {state!r}); went on"
        await asyncio.sleep(0.25)


# -- one hole ------------------------------------------------------------------------------------


def score(answer: str, hole: CrossHole) -> dict[str, Any]:
    """The per-hole metrics (module doc) of ``answer`` at ``hole``: ``name`` (starts
    with the name, and the identifier ends there), ``exact`` (first line equals the truth, trailing whitespace
    ignored), ``accepted_chars`` (common prefix with the truth, code points),
    ``truth_chars`` and ``empty``."""
    empty = not answer.strip()
    first = answer.split("\n", 1)[0].rstrip()
    after = answer[len(hole.name) : len(hole.name) + 1]
    return {
        "name": answer.startswith(hole.name) and not (after.isalnum() or after in ("_", "$")),
        "exact": not empty and first == hole.truth,
        "accepted_chars": common_prefix_len(answer, hole.truth),
        "truth_chars": len(hole.truth),
        "empty": empty,
    }


def _record(hole: CrossHole, raw: dict[str, Any], shown: str) -> dict[str, Any]:
    return {
        "hole": hole.id,
        "project": hole.project,
        "rel": hole.rel,
        "name": hole.name,
        **raw,
        "shown": shown,
        "score": score(shown, hole),
    }


async def ask_sidecar(qc: CrossClient, hole: CrossHole, open_definer: bool) -> dict[str, Any]:
    """One hole on a sidecar: G opened first when ``open_definer`` (its text on disk),
    then F with the hole's text, both at their real ``file://`` URIs; one inline request
    (trigger Automatic); the final text after the updates; both closed again. Returns
    first and final text, latencies (ms), updates, settled, error."""
    uri = Path(hole.file).as_uri()
    g_uri = Path(hole.defined_in_path).as_uri() if open_definer and hole.defined_in_path else None
    if g_uri is not None:
        qc.open(g_uri, hole.language, Path(hole.defined_in_path).read_text(encoding="utf-8"))
    qc.open(uri, hole.language, hole.document)
    t0 = time.monotonic()
    first, ms, error = await qc.inline(uri, hole.line, hole.character)
    first = first or ""
    final, nupd, settled, t_final = await qc.settle(uri, first)
    qc.close_doc(uri)
    if g_uri is not None:
        qc.close_doc(g_uri)
    qc.updates.pop(uri, None)
    return {
        "first": first,
        "final": final,
        "latency_ms": round(ms, 1),
        "final_ms": round(max(ms, (t_final - t0) * 1000), 1) if nupd else round(ms, 1),
        "updates": nupd,
        "settled": settled,
        "error": error,
        "opened_definer": g_uri is not None,
    }


# -- runs -------------------------------------------------------------------------------------------


@dataclass
class ProjectHoles:
    """A project, what it gives (``project_counts``) and the holes made from it."""

    project: Project
    counts: dict[str, int]
    holes: list[CrossHole]


async def start_server(
    system: str, project: Project, model: str | None, opts: Options, workdir: Path, warm: CrossHole
) -> tuple[CrossClient | None, dict[str, Any], str | None]:
    """Start a sidecar for ``system`` on ``project`` (its workspace; ``workspace_index``
    as the column wants), wait for its engine and its index, and warm it up with
    ``warm`` (not scored). Returns (client or None, what the server reported: engine,
    workspace index, warning; the failure or None)."""
    settings = {**opts.settings, INDEX_SETTING: index_on(system)}
    env = sidecar_env(workdir / f"{system}-{project.name}-{uuid.uuid4().hex[:6]}", model, opts.max_tokens, settings)
    qc = CrossClient(project.root)
    info: dict[str, Any] = {"root": str(project.root)}
    try:
        await qc.start(env, declare_updates=True)
    except Exception as exc:  # noqa: BLE001
        why = f"the sidecar did not start: {type(exc).__name__}: {exc} {qc.stderr_tail()}".strip()
        await qc.close()
        return None, info, why
    st = await qc.wait_health(opts.ready_timeout_s)
    if st is None or st.get("health") != "ready":
        why = "; ".join(qc.messages[-3:]) or qc.stderr_tail() or "no status from the server"
        await qc.close()
        return (
            None,
            info,
            (
                f"the local engine did not become ready ({why})"
                if st is None or st.get("health") == "error"
                else f"unexpected status {st}"
            ),
        )
    info.update(engine={"pid": st.get("enginePid"), "url": st.get("engineUrl"), "model": st.get("model")})
    t0 = time.monotonic()
    wi, warning = await wait_index(qc, index_on(system))
    info.update(workspace_index=wi, index_wait_s=round(time.monotonic() - t0, 2), warning=warning)
    await warm_up(qc, warm)
    return qc, info, None


async def warm_up(qc: CrossClient, hole: CrossHole) -> None:
    """One request that is not scored: F's whole text on disk (no hole) at a URI outside
    the workspace, the cursor at the end of its first line. Never the hole's own text and
    place, which a server could answer from the warm-up's stream."""
    text = Path(hole.file).read_text(encoding="utf-8")
    first = text.split("\n", 1)[0].rstrip("\r")
    uri = f"file:///sidecar-bench-crossfile/warmup/{Path(hole.file).name}"
    qc.open(uri, hole.language, text)
    answer, _ms, _err = await qc.inline(uri, 0, utf16_len(first))
    await qc.settle(uri, answer or "")
    qc.close_doc(uri)
    qc.updates.pop(uri, None)


def counter_delta(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, int]:
    """The ``sidecar.stats`` counters that changed between two snapshots (``after`` minus
    ``before``, by counter name): what the server did for one hole (``gate.held_back``,
    ``empty``, ``postprocess.*``...). Empty when either snapshot is missing."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return {}
    b, a = before.get("counters") or {}, after.get("counters") or {}
    return {
        k: int(v) - int(b.get(k, 0)) for k, v in sorted(a.items()) if isinstance(v, (int, float)) and v != b.get(k, 0)
    }


def _failed(holes: list[CrossHole], why: str) -> list[dict[str, Any]]:
    raw = {"first": "", "final": "", "latency_ms": None, "final_ms": None, "error": why}
    return [_record(h, dict(raw), "") for h in holes]


async def run_fim(engine_url: str | None, template: Any, holes: list[CrossHole], opts: Options) -> list[dict[str, Any]]:
    """The ``fim-client`` answers at ``holes`` on the engine at ``engine_url`` (one
    warm-up request first, not scored); records as :func:`_record` makes them."""
    import httpx2 as httpx

    if not engine_url:
        return _failed(holes, "the sidecar named no local engine URL (engineUrl in its status)")
    base = engine_url.rstrip("/")
    out = []
    async with httpx.AsyncClient(timeout=httpx.Timeout(REQUEST_TIMEOUT_S, connect=5.0), trust_env=False) as client:
        await stream_answer(client, base, fim_body(holes[0], template, opts))
        for hole in holes:
            raw = await stream_answer(client, base, fim_body(hole, template, opts))
            out.append(_record(hole, raw, raw["first"]))
    return out


async def run_project(
    ph: ProjectHoles,
    systems: list[str],
    model: str | None,
    opts: Options,
    workdir: Path,
    runs: dict[str, ColumnRun],
    progress: Callable[[str], None],
) -> None:
    """Every system on one project's holes, one after another, appending to ``runs``
    (by system): the sidecar columns in ``SYSTEMS`` order, each on its own server;
    ``fim-client`` on the engine of the last one, before it shuts down (or of a sidecar
    started for it, ``today``'s settings, when no sidecar column runs)."""
    holes = ph.holes
    name = ph.project.name
    sidecars = [s for s in SYSTEMS if s in systems and s in SIDECAR_SYSTEMS]
    fim = "fim-client" in systems and not runs["fim-client"].not_run
    hosts = sidecars or (["today"] if fim else [])
    for i, system in enumerate(hosts):
        is_column = system in sidecars
        last = i == len(hosts) - 1
        progress(f"{name}: {system if is_column else 'a host for fim-client'}: starting the sidecar")
        t = time.monotonic()
        qc, info, why = await start_server(system, ph.project, model, opts, workdir, holes[0])
        target = runs[system] if is_column else runs["fim-client"]
        target.engine.setdefault("projects", {})[name] = info
        if info.get("warning"):
            progress(f"{name}: {system}: WARNING {info['warning']}")
            target.notes.append(f"{name}: {info['warning']}")
        if qc is None:
            progress(f"{name}: {system}: FAILED {why}")
            target.notes.append(f"{name}: {why}")
            if is_column:
                runs[system].records += _failed(holes, why or "did not start")
            if last and fim:
                runs["fim-client"].records += _failed(holes, why or "no engine")
            continue
        try:
            if is_column:
                for n, hole in enumerate(holes):
                    if not qc.alive:
                        runs[system].records += _failed(holes[n:], "server died")
                        runs[system].notes.append(f"{name}: the server exited during the run: {qc.stderr_tail()}")
                        break
                    before = await qc.stats()
                    raw = await ask_sidecar(qc, hole, opens_definer(system))
                    raw["counters"] = counter_delta(before, await qc.stats())
                    runs[system].records.append(_record(hole, raw, raw["final"]))
                runs[system].server_messages += qc.messages
                runs[system].wall_s += time.monotonic() - t
            if last and fim:
                progress(f"{name}: fim-client: the same engine, FIM template prompts")
                tf = time.monotonic()
                url = info.get("engine", {}).get("url") if qc.alive else None
                if is_column:
                    runs["fim-client"].engine.setdefault("projects", {})[name] = {"host": system, **info}
                runs["fim-client"].records += await run_fim(url, fim_template(model), holes, opts)
                runs["fim-client"].wall_s += time.monotonic() - tf
        finally:
            await qc.close()


def _median(values: list[Any]) -> float | None:
    vals = [v for v in values if v is not None]
    return round(statistics.median(vals), 1) if vals else None


def _totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    sc = [r["score"] for r in records]
    acc = sum(s["accepted_chars"] for s in sc)
    truth = sum(s["truth_chars"] for s in sc)
    return {
        "holes": n,
        "answered": sum(not s["empty"] for s in sc),
        "name": sum(s["name"] for s in sc),
        "exact": sum(s["exact"] for s in sc),
        "accepted_chars_per_hole": round(acc / n, 2) if n else None,
        "accepted_chars_pct": round(100.0 * acc / truth, 1) if truth else None,
        "empty": sum(s["empty"] for s in sc),
        "errors": sum(1 for r in records if r.get("error")),
        "latency_p50_ms": _median([r.get("latency_ms") for r in records]),
        "final_p50_ms": _median([r.get("final_ms") for r in records]),
    }


def summarize(records: list[dict[str, Any]], projects: list[str]) -> dict[str, Any]:
    """One column's totals (``_totals``: counts, accepted characters per hole, their
    share of the truth's characters in percent, latencies in ms) overall and, under
    ``by_project``, for each of ``projects``."""
    out = _totals(records)
    out["by_project"] = {p: _totals([r for r in records if r["project"] == p]) for p in projects}
    return out


#: (summary key, label, format); ``ratio``: the key's count of the holes.
ROWS = (
    ("holes", "holes", "{:d}"),
    ("name", "name right (starts with the name)", "ratio"),
    ("exact", "exact first line", "ratio"),
    ("accepted_chars_per_hole", "accepted chars / hole", "{:.2f}"),
    ("accepted_chars_pct", "accepted chars % of truth", "{:.1f}"),
    ("empty", "empty answers", "ratio"),
    ("latency_p50_ms", "first answer p50 ms", "{:.0f}"),
    ("final_p50_ms", "final text p50 ms", "{:.0f}"),
    ("errors", "failed requests", "{:d}"),
)
PROJECT_ROWS = (
    ("name", "name right", "ratio"),
    ("exact", "exact first line", "ratio"),
    ("accepted_chars_per_hole", "accepted chars / hole", "{:.2f}"),
)


def _cell(summary: dict[str, Any], key: str, fmt: str) -> str:
    if summary.get("not_run"):
        return "not run"
    value = summary.get(key)
    if fmt == "ratio":
        return ratio_cell(value, summary.get("holes"))
    return "-" if value is None else fmt.format(value)


def project_label(name: str, made: int, asked: int) -> str:
    """The per-project ``holes`` row's label; it says when the project gave too few."""
    return f"holes ({name})" if made >= asked else f"holes ({name}: too few, {made} of {asked})"


def format_table(summaries: dict[str, dict[str, Any]], made: dict[str, int], asked: int, title: str) -> str:
    """The table: ``title``, then rows of metrics (overall, then per project of ``made``,
    project name -> holes made) and a column per system; ``asked`` is
    ``--holes-per-project``."""
    names = list(summaries)
    rows = [["metric", *names]]
    for key, label, fmt in ROWS:
        rows.append([label, *(_cell(summaries[n], key, fmt) for n in names)])
    for project, count in made.items():
        per = {
            n: {"not_run": summaries[n].get("not_run"), **summaries[n].get("by_project", {}).get(project, {})}
            for n in names
        }
        rows.append([project_label(project, count, asked), *(_cell(per[n], "holes", "{:d}") for n in names)])
        for key, label, fmt in PROJECT_ROWS:
            rows.append([f"{label} ({project})", *(_cell(per[n], key, fmt) if count else "-" for n in names)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    for name, s in summaries.items():
        if s.get("not_run"):
            lines.append(f"{name}: {s['not_run']}")
    return "\n".join(lines)


@dataclass
class CrossResult:
    """What one run produced: summaries and runs by system, the table, the JSON path."""

    summaries: dict[str, dict[str, Any]]
    runs: dict[str, ColumnRun]
    table: str
    json_path: Path
    holes: list[CrossHole]
    wall_s: float
    failures: list[str] = field(default_factory=list)


def table_title(half: str, holes: int, projects: list[ProjectHoles], seed: int, model: str | None) -> str:
    """The table's first line: the half, the holes, projects and languages, seed, model."""
    langs = sorted({ph.project.language for ph in projects})
    stem = Path(model).stem if model else "shipped model"
    return (
        f"Cross-file quality, {HALF_TITLES.get(half, half)}: {holes} holes in {len(projects)} projects "
        f"({', '.join(langs)}), seed {seed}, model {stem}"
    )


async def run_crossfile(
    projects: list[ProjectHoles],
    *,
    systems: list[str],
    model: str | None,
    out_dir: Path,
    opts: Options,
    half: str,
    seed: int,
    per_file: int,
    per_project: int,
    progress: Callable[[str], None] | None = None,
) -> CrossResult:
    """Run every system on every project's holes (project by project) and write
    ``crossfile.json`` into ``out_dir``. Raises ValueError when there is no hole."""
    progress = progress or (lambda _m: None)
    systems = sorted(systems, key=SYSTEMS.index)
    holes = [h for ph in projects for h in ph.holes]
    if not holes:
        raise ValueError("no cross-file hole could be made from " + ", ".join(ph.project.name for ph in projects))
    runs = {s: ColumnRun(s, model) for s in systems}
    if "fim-client" in systems and fim_template(model) is None:
        stem = Path(model).stem if model else "no model file"
        runs["fim-client"].not_run = f"{NO_FIM_TEMPLATE} ({stem} matches no FIM template family)"
    logging.getLogger("pygls").setLevel(logging.ERROR)
    t0 = time.monotonic()
    load_start = _loadavg()
    with tempfile.TemporaryDirectory(prefix="sidecar-crossfile-work-") as tmp:
        for ph in projects:
            if ph.holes:
                progress(f"{ph.project.name}: {len(ph.holes)} holes in {ph.project.root}")
                await run_project(ph, systems, model, opts, Path(tmp), runs, progress)
    wall = time.monotonic() - t0
    names = [ph.project.name for ph in projects]
    summaries = {
        s: {"not_run": run.not_run, "holes": 0, "by_project": {}} if run.not_run else summarize(run.records, names)
        for s, run in runs.items()
    }
    title = table_title(half, len(holes), projects, seed, model)
    made = {ph.project.name: len(ph.holes) for ph in projects}
    table = format_table(summaries, made, per_project, title)
    failures = []
    for s, run in runs.items():
        if not run.not_run and summaries[s]["answered"] == 0:
            errs = [r["error"] for r in run.records if r.get("error")]
            why = f"first error: {errs[0]}" if errs else "every answer was empty"
            failures.append(f"{s}: answered nothing at {len(run.records)} holes ({why})")
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / "crossfile.json"
    payload = {
        "setup": {
            "half": half,
            "seed": seed,
            "holes_per_file": per_file,
            "holes_per_project": per_project,
            "systems": systems,
            "model": model,
            "max_tokens": opts.max_tokens,
            "fim_prefix_chars": opts.fim_prefix_chars,
            "fim_suffix_chars": opts.fim_suffix_chars,
            "temperature": 0.0,
            "sidecar_settings": {"prefetch_enabled": False, "cache_enabled": False, **opts.settings},
            "cpu_count": os.cpu_count(),
            "load_avg_start": load_start,
            "load_avg_end": _loadavg(),
        },
        "projects": {
            ph.project.name: {
                "half": ph.project.half,
                "language": ph.project.language,
                "root": str(ph.project.root),
                **ph.counts,
                "holes": len(ph.holes),
                "too_few": len(ph.holes) < per_project,
            }
            for ph in projects
        },
        "wall_s": round(wall, 1),
        "table_text": table,
        "summaries": summaries,
        "failures": failures,
        "columns": {
            s: {
                "system": run.system,
                "model": run.model,
                "not_run": run.not_run,
                "servers": run.engine.get("projects", {}),
                "notes": run.notes,
                "server_messages": run.server_messages,
                "wall_s": round(run.wall_s, 1),
                "records": run.records,
            }
            for s, run in runs.items()
        },
        "holes": [h.describe() for h in holes],
    }
    json_path.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
    return CrossResult(summaries, runs, table, json_path, holes, wall, failures)


# -- projects ----------------------------------------------------------------------------------------


class ArgumentError(ValueError):
    """A bad ``--projects`` or ``--half`` choice (exit status 2); the message says why."""


def pick_packages(half: str, wanted: list[str], manifest: Path | None = None) -> list[Any]:
    """The manifest's packages of ``half`` (``tune``, ``report`` or ``all``) with a
    definition finder, or those of them ``wanted`` names (a package name, or a part of
    exactly one package's name), in manifest order. Raises ArgumentError for a name that
    matches no package or several, a package of the other half, or one in a language
    without a definition finder; CorpusError for a bad manifest."""
    from .corpus import MANIFEST, load_manifest

    pkgs = load_manifest(manifest or MANIFEST)
    in_half = [p for p in pkgs if half == "all" or p.half == half]
    if not wanted:
        return [p for p in in_half if p.language in LANGUAGES]
    chosen = []
    for w in wanted:
        exact = [p for p in pkgs if p.name == w]
        matches = exact or [p for p in pkgs if w in p.name]
        if len(matches) != 1:
            names = ", ".join(p.name for p in pkgs if p.language in LANGUAGES)
            what = "matches no package" if not matches else f"matches {len(matches)} packages"
            raise ArgumentError(f"--projects {w!r} {what}; choose from {names}")
        pkg = matches[0]
        if pkg not in in_half:
            raise ArgumentError(f"{pkg.name} is in the {pkg.half} half, not {half}: add --half {pkg.half} (or all)")
        if pkg.language not in LANGUAGES:
            raise ArgumentError(
                f"{pkg.name} is {pkg.language}: the benchmark has no definition finder for it "
                f"(it reads {', '.join(LANGUAGES)})"
            )
        if pkg not in chosen:
            chosen.append(pkg)
    return [p for p in in_half if p in chosen]


def load_projects(packages: list[Any], seed: int, per_file: int, per_project: int) -> list[ProjectHoles]:
    """Each package's whole tree (fetched and extracted as needed), read and holed.
    Raises CorpusError when a package cannot be fetched or extracted."""
    from .corpus import package_tree

    out = []
    for pkg in packages:
        tree = package_tree(pkg)
        project = load_project(pkg.name, pkg.half, pkg.language, tree.root, tree.files)
        out.append(ProjectHoles(project, project_counts(project), select_holes(project, seed, per_file, per_project)))
    return out


def format_projects(projects: list[ProjectHoles], per_project: int) -> str:
    """A table of what each project gives: half, language, files, lines, defined names,
    hole positions (and in how many files), holes made."""
    head = ["half", "project", "language", "files", "lines", "names", "positions", "in files", "holes"]
    rows = [head]
    for ph in projects:
        c = ph.counts
        made = len(ph.holes)
        rows.append(
            [
                ph.project.half,
                ph.project.name,
                ph.project.language,
                str(c["files"]),
                str(c["lines"]),
                str(c["names"]),
                str(c["candidates"]),
                str(c["files_with_candidates"]),
                f"{made}" + ("" if made >= per_project else f" (too few: {per_project} asked)"),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows)


# -- command line ----------------------------------------------------------------------------------

_EPILOG = """\
holes (devtools/bench/crossfile_holes.py has the exact rules): in a file F, the first use
of a name X (4+ characters, not a standard-library name) that another file G of the
project defines and F does not; the cursor at X, the truth the rest of the line. Never
an import line.

systems:
  index       the sidecar, the project as its workspace, workspace_index = true, F open
  index-open  the same, and G open too
  today       workspace_index = false (what the sidecar sees today), F open
  today-open  workspace_index = false, G open too (today's open-files context)
  fim-client  a plain FIM client on the same engine (no cross-file context)

metrics: name right (the suggestion starts with X), exact first line, accepted
characters per hole (common prefix with the truth), empty answers, latency p50; overall
and per project.

exit status: 0 done, 1 a column answered nothing or a project could not be fetched,
2 bad arguments or no hole.
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Cross-file quality: holes at names defined in another file of a real project,\n"
        "answered by the sidecar with and without its workspace index (and with the defining\n"
        "file open or not) and by a plain FIM client, on the same local engine.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--half",
        default="report",
        choices=("tune", "report", "all"),
        help="the corpus half (default report, the half published figures come from; tuning is done on tune)",
    )
    p.add_argument("--projects", default="", help="comma-separated package names of that half (default: all of it)")
    p.add_argument("--seed", type=int, default=0, help="seed of the hole choice (default 0)")
    p.add_argument(
        "--holes-per-file",
        type=int,
        default=DEFAULT_HOLES_PER_FILE,
        help=f"at most this many holes in one file (default {DEFAULT_HOLES_PER_FILE})",
    )
    p.add_argument(
        "--holes-per-project",
        type=int,
        default=DEFAULT_HOLES_PER_PROJECT,
        help=f"at most this many holes in one project (default {DEFAULT_HOLES_PER_PROJECT})",
    )
    p.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help=f"comma-separated columns from {', '.join(SYSTEMS)} (default {','.join(DEFAULT_SYSTEMS)})",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"max_tokens of every request, model tokens (default {DEFAULT_MAX_TOKENS})",
    )
    p.add_argument(
        "--fim-prefix-chars",
        type=int,
        default=DEFAULT_FIM_PREFIX_CHARS,
        help=f"characters before the cursor in the fim-client prompt (default {DEFAULT_FIM_PREFIX_CHARS})",
    )
    p.add_argument(
        "--fim-suffix-chars",
        type=int,
        default=DEFAULT_FIM_SUFFIX_CHARS,
        help=f"characters after the cursor in the fim-client prompt (default {DEFAULT_FIM_SUFFIX_CHARS})",
    )
    p.add_argument(
        "--model",
        default=None,
        metavar="PATH|NAME",
        help="a GGUF file or installed catalog model (default: the one the sidecar would load)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a sidecar setting for every sidecar column (not {INDEX_SETTING}, which is the column's); repeatable",
    )
    p.add_argument(
        "--out", default=None, help="output directory for crossfile.json (default: a new temporary directory)"
    )
    p.add_argument("--list", action="store_true", help="only list what each project gives (no model, no server)")
    return p


def _fail(msg: str, status: int) -> int:
    print(f"{PROG}: {msg}", file=sys.stderr)
    return status


def main(argv: list[str] | None = None) -> int:
    """The command line (module doc); returns the exit status."""
    args = _parser().parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if not systems or len(set(systems)) != len(systems) or any(s not in SYSTEMS for s in systems):
        return _fail(f"--systems takes distinct names from {', '.join(SYSTEMS)}, got {args.systems!r}", 2)
    for name in ("holes_per_file", "holes_per_project", "max_tokens", "fim_prefix_chars"):
        if getattr(args, name) < 1:
            return _fail(f"--{name.replace('_', '-')} must be at least 1", 2)
    if args.fim_suffix_chars < 0:
        return _fail("--fim-suffix-chars must be at least 0", 2)
    settings: dict[str, Any] = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            return _fail(f"--set takes KEY=VALUE, got {item!r}", 2)
        if key.strip() in (INDEX_SETTING, "workspaceIndex"):
            return _fail(f"--set {key.strip()}: {INDEX_SETTING} is what the columns compare; pick --systems instead", 2)
        settings[key.strip()] = _toml_value(value.strip())
    from sidecar.config import normalize  # the server's own check: a typo must not pass silently

    problems: list[str] = []
    normalize(dict(settings), "--set", problems)
    if problems:
        for msg in problems:
            print(f"{PROG}: {msg}", file=sys.stderr)
        return 2
    from .corpus import CorpusError

    wanted = [w.strip() for w in args.projects.split(",") if w.strip()]
    try:
        packages = pick_packages(args.half, wanted)
    except ArgumentError as exc:
        return _fail(str(exc), 2)
    except CorpusError as exc:
        return _fail(f"the real-code corpus cannot be used: {exc}", 1)
    if not packages:
        return _fail(f"the {args.half} half has no project in {', '.join(LANGUAGES)}", 2)
    try:
        projects = load_projects(packages, args.seed, args.holes_per_file, args.holes_per_project)
    except CorpusError as exc:
        return _fail(f"a project could not be fetched: {exc}", 1)
    print(f"projects: the {HALF_TITLES[args.half]}, seed {args.seed} (devtools/bench/corpus.py, package_tree)")
    print(format_projects(projects, args.holes_per_project), flush=True)
    total = sum(len(ph.holes) for ph in projects)
    if args.list:
        print(f"{total} holes; cache: {projects[0].project.root.parents[1] if projects else '-'}")
        return 0 if total else 2
    if not total:
        return _fail("no cross-file hole could be made from " + ", ".join(p.name for p in packages), 2)
    try:
        if args.model:
            model: str | None = resolve_model(args.model)
        else:
            dm = default_model()
            model = dm.path
            print(
                f"default model (what the sidecar would load): {dm.name}: {dm.path or 'the shipped GGUF was not found'}"
                + (f" ({dm.note})" if dm.note else ""),
                flush=True,
            )
    except ModelError as exc:
        return _fail(str(exc), 2)

    def progress(msg: str) -> None:
        print(f"[crossfile] {msg}", file=sys.stderr, flush=True)

    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="sidecar-crossfile-"))
    opts = Options(
        max_tokens=args.max_tokens,
        fim_prefix_chars=args.fim_prefix_chars,
        fim_suffix_chars=args.fim_suffix_chars,
        settings=settings,
    )
    try:
        result = asyncio.run(
            run_crossfile(
                projects,
                systems=systems,
                model=model,
                out_dir=out,
                opts=opts,
                half=args.half,
                seed=args.seed,
                per_file=args.holes_per_file,
                per_project=args.holes_per_project,
                progress=progress,
            )
        )
    except ValueError as exc:
        return _fail(str(exc), 2)
    print(result.table)
    load = _loadavg()
    print(
        f"total wall time {result.wall_s:.1f} s"
        + (f", load average {load[0]:.2f} on {os.cpu_count()} CPUs" if load else "")
    )
    for s, run in result.runs.items():
        for note in run.notes:
            print(f"{s}: {note}")
    for f in result.failures:
        print(f"ERROR {f}", file=sys.stderr)
    print(f"wrote {result.json_path}")
    if result.failures:
        return _fail("at least one column answered nothing; its figures mean nothing", 1)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
