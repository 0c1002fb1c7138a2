#!/usr/bin/env python3
"""Soak benchmark: many thousands of inline completion requests against one `sidecar
serve` process, and how its memory grows.

The server is a real `python -m sidecar serve` on stdio; the client is pygls's language
client; the backend is the simulated OpenAI-compatible server on loopback (fast: TTFT
20 ms, 500 tokens/s, so the run measures the sidecar, not the model). Several typists
type bursts into `--docs` documents (each keystroke a `didChange` and an inline
completion request), cancel a share of the requests with `$/cancelRequest`, and now and
then close a document and open it again. The server's resident set size (VmRSS, from
/proc) is sampled at the start (after initialize), after the warm-up (`--warmup`
requests) and at the end.

Prints a table and writes JSON (`--json-out`, default bench-results/soak.json). Exits 1
when a request was left unanswered, an unexpected error came back, nothing was answered
at all, or the growth after warm-up is over `--max-growth-mb` per 1,000 requests.

    .venv/bin/python scripts/bench_soak.py --requests 10000
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devtools.simulator import LatencyModel, SimulatedBackend  # noqa: E402

WORDS = ["total", "count", "items", "value", "result", "index", "name", "data", "self", "return"]


def rss_mb(pid: int) -> float:
    """Resident set size of ``pid`` in MiB (VmRSS in /proc/<pid>/status)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Soak:
    def __init__(self, client: LanguageClient, args: argparse.Namespace) -> None:
        self.client = client
        self.args = args
        self.rng = random.Random(args.seed)
        self.ids = itertools.count(10_000)
        self.sent = 0
        self.answered = 0
        self.cancelled_ok = 0
        self.errors: list[str] = []
        self.unanswered = 0
        self.latencies: list[float] = []
        self.versions: dict[str, int] = {}
        self.lines: dict[str, str] = {}
        self.samples: list[tuple[int, float]] = []

    def open(self, uri: str) -> None:
        self.versions[uri] = 1
        self.lines[uri] = "    "
        text = "def work(data):\n    total = 0\n    for item in data:\n        total += item\n    \n    return total\n"
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
            )
        )

    def type_char(self, uri: str, ch: str) -> None:
        col = len(self.lines[uri])
        self.versions[uri] += 1
        if ch == "\b":
            if col <= 4:
                return
            rng = types.Range(start=types.Position(4, col - 1), end=types.Position(4, col))
            self.lines[uri] = self.lines[uri][:-1]
            ch = ""
        else:
            rng = types.Range(start=types.Position(4, col), end=types.Position(4, col))
            self.lines[uri] += ch
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangePartial(range=rng, text=ch)],
            )
        )

    async def request(self, uri: str) -> None:
        msg_id = next(self.ids)
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(4, len(self.lines[uri])),
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
        )
        fut = asyncio.wrap_future(
            self.client.protocol.send_request(types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id)
        )
        self.sent += 1
        t0 = time.perf_counter()
        cancel = self.rng.random() < self.args.cancel_rate
        if cancel:
            await asyncio.sleep(self.rng.uniform(0.0, 0.05))
            self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.args.answer_timeout)
            self.answered += 1
            self.latencies.append((time.perf_counter() - t0) * 1000)
        except TimeoutError:
            self.unanswered += 1
        except Exception as exc:  # noqa: BLE001 - classify the error
            code = getattr(exc, "code", None)
            if code == -32800 and cancel:
                self.cancelled_ok += 1
            else:
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    async def typist(self, docs: list[str], quota: int) -> None:
        done = 0
        while done < quota:
            uri = self.rng.choice(docs)
            if self.rng.random() < 0.02:  # close and reopen now and then
                self.client.text_document_did_close(
                    types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
                )
                self.open(uri)
            burst = []
            word = self.rng.choice(WORDS)
            keys = list(word) + ([" "] if self.rng.random() < 0.5 else []) + (["\b"] * self.rng.randint(0, 3))
            for ch in keys[: max(1, quota - done)]:
                self.type_char(uri, ch)
                burst.append(asyncio.ensure_future(self.request(uri)))
                done += 1
                await asyncio.sleep(self.rng.uniform(0.005, 0.03))
            if len(self.lines[uri]) > 60:  # keep the line short: select-all of the line and retype
                self.versions[uri] += 1
                self.client.text_document_did_change(
                    types.DidChangeTextDocumentParams(
                        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                        content_changes=[
                            types.TextDocumentContentChangePartial(
                                range=types.Range(
                                    start=types.Position(4, 4), end=types.Position(4, len(self.lines[uri]))
                                ),
                                text="",
                            )
                        ],
                    )
                )
                self.lines[uri] = "    "
            await asyncio.gather(*burst)


async def main_async(args: argparse.Namespace) -> int:
    async with SimulatedBackend(LatencyModel(ttft_ms=20, tokens_per_s=500, seed=args.seed)) as sim:
        sim.set_responder(lambda body: "len(data)  # soak")
        state = Path(args.state_dir)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SIDECAR_", "SILICONFLOW_"))}
        env.update(
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_CONFIG=str(state / "config.toml"),
            XDG_CACHE_HOME=str(state / "cache"),
            XDG_STATE_HOME=str(state / "state"),
            SIDECAR_LOG_LEVEL="warning",
            PYTHONPATH=str(ROOT),
        )
        client = LanguageClient("sidecar-soak", "1")
        for method in ("sidecar/inlineCompletionUpdate", "sidecar/status"):
            client.feature(method)(lambda *_a: None)
        await client.start_io(sys.executable, "-m", "sidecar", "serve", env=env)
        pid = client._server.pid  # type: ignore[union-attr]
        await client.initialize_async(types.InitializeParams(capabilities=types.ClientCapabilities()))
        client.initialized(types.InitializedParams())
        await asyncio.sleep(1.0)
        soak = Soak(client, args)
        docs = [f"file:///soak/doc{i}.py" for i in range(args.docs)]
        for uri in docs:
            soak.open(uri)
        t_start = time.perf_counter()
        rss_start = rss_mb(pid)
        soak.samples.append((0, rss_start))
        typists = 4
        per_typist_docs = [docs[i::typists] for i in range(typists)]

        async def phase(total: int) -> None:
            share = total // typists
            await asyncio.gather(*(soak.typist(d, share) for d in per_typist_docs))

        await phase(args.warmup)
        rss_warm = rss_mb(pid)
        soak.samples.append((soak.sent, rss_warm))
        after_warm = soak.sent
        remaining = args.requests - args.warmup
        step = max(typists, args.sample_every)
        while remaining > 0:
            n = min(step, remaining)
            await phase(n)
            remaining -= n
            soak.samples.append((soak.sent, rss_mb(pid)))
        elapsed = time.perf_counter() - t_start
        rss_end = rss_mb(pid)
        try:
            await asyncio.wait_for(client.shutdown_async(None), 10)
            client.exit(None)
        except Exception:  # noqa: BLE001
            pass
        await asyncio.sleep(0.5)
        if client._server is not None and client._server.returncode is None:  # type: ignore[union-attr]
            client._server.kill()  # type: ignore[union-attr]
        await client.stop()

    post = soak.sent - after_warm
    growth = (rss_end - rss_warm) / (post / 1000) if post else float("nan")
    lat = sorted(soak.latencies)

    def pct(q: float) -> float:
        return lat[min(len(lat) - 1, int(q * (len(lat) - 1)))] if lat else float("nan")

    result = {
        "requests": soak.sent,
        "answered": soak.answered,
        "cancelled_answered_32800": soak.cancelled_ok,
        "unanswered": soak.unanswered,
        "errors": len(soak.errors),
        "error_samples": soak.errors[:5],
        "seconds": round(elapsed, 1),
        "docs": args.docs,
        "rss_mb": {"start": round(rss_start, 1), "after_warmup": round(rss_warm, 1), "end": round(rss_end, 1)},
        "growth_mb_per_1000_after_warmup": round(growth, 3),
        "latency_ms": {"p50": round(pct(0.5), 1), "p99": round(pct(0.99), 1)},
        "samples": [{"requests": n, "rss_mb": round(r, 1)} for n, r in soak.samples],
    }
    rows = [
        ("requests sent", soak.sent),
        ("answered (results)", soak.answered),
        ("answered -32800 (cancelled)", soak.cancelled_ok),
        ("unanswered", soak.unanswered),
        ("unexpected errors", len(soak.errors)),
        ("documents", args.docs),
        ("duration (s)", f"{elapsed:.0f}"),
        ("RSS start (MiB)", f"{rss_start:.1f}"),
        (f"RSS after warm-up, {after_warm} req (MiB)", f"{rss_warm:.1f}"),
        ("RSS end (MiB)", f"{rss_end:.1f}"),
        ("growth after warm-up (MiB / 1,000 req)", f"{growth:.3f}"),
        ("answer latency p50 / p99 (ms)", f"{pct(0.5):.0f} / {pct(0.99):.0f}"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    out = Path(args.json_out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")
    failures = []
    if soak.answered == 0:
        failures.append("no request was answered")
    if soak.unanswered:
        failures.append(f"{soak.unanswered} requests unanswered")
    if soak.errors:
        failures.append(f"{len(soak.errors)} unexpected errors, e.g. {soak.errors[0]}")
    if not growth <= args.max_growth_mb:
        failures.append(f"memory grew {growth:.3f} MiB per 1,000 requests after warm-up (limit {args.max_growth_mb})")
    for f in failures:
        print(f"FAIL: {f}", file=sys.stderr)
    return 1 if failures else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=10_000)
    p.add_argument("--warmup", type=int, default=1_000)
    p.add_argument("--docs", type=int, default=20)
    p.add_argument("--cancel-rate", type=float, default=0.2)
    p.add_argument("--answer-timeout", type=float, default=30.0, help="seconds before a request counts as unanswered")
    p.add_argument("--sample-every", type=int, default=1_000)
    p.add_argument("--max-growth-mb", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--state-dir", default=str(ROOT / "bench-results" / "soak-state"))
    p.add_argument("--json-out", default=str(ROOT / "bench-results" / "soak.json"))
    args = p.parse_args()
    if args.warmup >= args.requests:
        p.error("--warmup must be smaller than --requests")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
