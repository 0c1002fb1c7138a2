#!/usr/bin/env python3
"""Time to first token and tokens/s of the managed local engine, CPU against GPU.

Starts llama-cpp-python's server through the sidecar's own ``ManagedEngine`` once per
``--gpu-layers`` value (0 = CPU only, -1 = every layer on the GPU), streams ``--runs``
completions of a fixed code prompt with ``max_tokens`` tokens, and prints a table:
TTFT p50 (ms, request sent to first streamed token) and decode speed (tokens/s, from
the first to the last token). Writes JSON to ``--out``.
It also measures KV-cache reuse: the time to the first token of a ~1,000-token prompt
after an unrelated prompt, and after the same prompt one keystroke shorter.
Needs a CUDA build of llama-cpp-python for the GPU rows (see scripts/gpu_local_check.sh).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from pathlib import Path

import httpx2 as httpx

from sidecar.backends.managed_engine import ManagedEngine

PROMPT = 'import math\n\n\ndef circle_area(radius: float) -> float:\n    """Area of a circle."""\n    return '


async def _ttft(client, base_url: str, prompt: str) -> float:
    body = {"prompt": prompt, "max_tokens": 1, "temperature": 0}
    t = time.perf_counter()
    r = await client.post(f"{base_url}/completions", json=body)
    r.raise_for_status()
    return (time.perf_counter() - t) * 1000


async def prefix_reuse(client, base_url: str, rounds: int = 5) -> dict:
    """Time to the first token of a ~1,000-token prompt right after an unrelated prompt
    (the engine evaluates it all) and right after the same prompt minus its last line
    (consecutive keystrokes with a stable window: the engine keeps the shared KV prefix)."""
    src = Path(__file__).resolve().parents[1] / "fixtures" / "bench" / "job_queue.py"
    code = src.read_text() if src.exists() else PROMPT * 40
    long_a = code[:4000]
    other = "".join(f"value_{i} = {i} * {i}\n" for i in range(400))[:2000]
    cold, warm = [], []
    for i in range(rounds):
        await _ttft(client, base_url, other + f"# {i}\n")
        cold.append(await _ttft(client, base_url, long_a + f"x{i}"))
        warm.append(await _ttft(client, base_url, long_a + f"x{i}y"))
    return {"ttft_ms_unshared_prefix": statistics.median(cold), "ttft_ms_shared_prefix": statistics.median(warm)}


async def measure(layers: int, model: str | None, runs: int, max_tokens: int, threads: int | None = None) -> dict:
    engine = ManagedEngine(model, n_ctx=2048, n_gpu_layers=layers, threads=threads)
    t0 = time.perf_counter()
    engine.spawn()
    try:
        await engine.wait_ready(300)
        load_s = time.perf_counter() - t0
        ttft, speed = [], []
        async with httpx.AsyncClient(timeout=120, trust_env=False) as client:
            for i in range(runs):
                body = {"prompt": PROMPT + f"{i} * ", "max_tokens": max_tokens, "temperature": 0, "stream": True}
                sent = time.perf_counter()
                first = last = 0.0
                n = 0
                async with client.stream("POST", f"{engine.base_url}/completions", json=body) as resp:
                    async for line in resp.aiter_lines():
                        if not line.startswith("data: ") or line.strip() == "data: [DONE]":
                            continue
                        text = json.loads(line[6:])["choices"][0].get("text", "")
                        if text:
                            n += 1
                            last = time.perf_counter()
                            first = first or last
                if first:
                    ttft.append((first - sent) * 1000)
                    if n > 1 and last > first:
                        speed.append((n - 1) / (last - first))
            reuse = await prefix_reuse(client, engine.base_url)
        return {
            "n_gpu_layers": layers,
            "threads": threads,
            "load_s": load_s,
            "ttft_ms_p50": statistics.median(ttft) if ttft else None,
            "tokens_per_s": statistics.median(speed) if speed else None,
            "runs": runs,
            **reuse,
        }
    finally:
        engine.stop_sync()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu-layers", type=int, nargs="+", default=[0, -1])
    ap.add_argument("--model", default=None, help="GGUF path (default: the shipped SmolLM2-135M)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[None],
        help="CPU threads (default: llama-cpp-python's own choice, half the cores)",
    )
    ap.add_argument("--out", type=Path, default=Path("bench-results/engine_speed.json"))
    a = ap.parse_args()
    import platform

    cpu = (
        next(
            (ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    amx = "amx_tile" in Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else False
    print(f"CPU: {cpu}; cores: {__import__('os').cpu_count()}; advertises AMX (amx_tile): {'yes' if amx else 'no'}")
    rows = [
        asyncio.run(measure(layers, a.model, a.runs, a.max_tokens, threads))
        for layers in a.gpu_layers
        for threads in a.threads
    ]
    print(
        f"{'engine':18} {'load s':>7} {'TTFT p50 ms':>12} {'tokens/s':>9} {'~1k-token prompt TTFT: new / shared prefix ms':>48}"
    )
    for r in rows:
        label = "CPU" if r["n_gpu_layers"] == 0 else f"GPU ({r['n_gpu_layers']} layers)"
        if r.get("threads"):
            label += f", {r['threads']} thr"
        ttft = f"{r['ttft_ms_p50']:.1f}" if r["ttft_ms_p50"] is not None else "-"
        tps = f"{r['tokens_per_s']:.1f}" if r["tokens_per_s"] is not None else "-"
        reuse = f"{r['ttft_ms_unshared_prefix']:.0f} / {r['ttft_ms_shared_prefix']:.0f}"
        print(f"{label:18} {r['load_s']:7.1f} {ttft:>12} {tps:>9} {reuse:>48}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
