#!/usr/bin/env python3
"""Completion-cache benchmark: lookup latency at 100k entries and write cost.

Fills a fresh SQLite cache file with N entries (default 100,000) whose keys look like real
prompts (a ~3,000-character prefix window ending in a ~24-character cursor line, a
~600-character suffix window), then measures, with ``time.perf_counter``:

- a memory hit: the entry is in the in-memory LRU front;
- a SQLite hit: the entry is only in the file (a fresh process's view);
- a miss: nothing matches, after the full look-back over the cursor line;
- the write cost per completion: the synchronous ``put`` on the keystroke path, and the
  batched flush to SQLite (off the keystroke path) divided by the rows it wrote.

Prints a table and writes JSON (``--out``, default ``bench-results/cache.json``).
Run: ``.venv/bin/python scripts/bench_cache.py [--entries 100000] [--samples 2000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from sidecar.completion.cache import CacheKey, CompletionCache


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q / 100 * len(s)))]


def make_key(rng: random.Random, i: int, base: str) -> CacheKey:
    cursor_line = f"    value_{i} = compute_{rng.randrange(10**6)}("
    return CacheKey(
        "siliconflow:https://api.siliconflow.cn/v1",
        "Qwen/Qwen2.5-Coder-7B-Instruct",
        "python",
        base + f"# block {i}\n" + cursor_line,
        "\n" + base[:600],
    )


async def run(entries: int, samples: int, out: Path) -> dict:
    rng = random.Random(0)
    base = "".join(f"def helper_{j}(x):\n    return x * {j} + {j // 3}\n\n" for j in range(90))[:3000]
    tmp = Path(tempfile.mkdtemp())
    path = tmp / "bench.sqlite3"
    cache = CompletionCache(path, max_entries=entries * 2, max_bytes=1 << 34, ttl_s=86400)
    await cache.open()
    keys = [make_key(rng, i, base) for i in range(entries)]
    text = "a + b * c\n    return result"

    put_s: list[float] = []
    flush_s: list[float] = []
    batch = 0
    t_fill = time.perf_counter()
    for k in keys:
        t = time.perf_counter()
        cache.put(k, text, partial=False)
        put_s.append(time.perf_counter() - t)
        batch += 1
        if batch == 64:  # the store's FLUSH_AT: one transaction per 64 completions
            t = time.perf_counter()
            await cache.store.flush()
            flush_s.append((time.perf_counter() - t) / batch)
            batch = 0
    await cache.store.flush()
    fill_s = time.perf_counter() - t_fill

    # Memory hits: the most recent entries are in the LRU front.
    recent = keys[-len(cache.memory) :]
    mem = []
    for k in rng.sample(recent, min(samples, len(recent))):
        t = time.perf_counter()
        hit = await cache.lookup(k)
        mem.append(time.perf_counter() - t)
        assert hit and hit.layer == "memory"

    # SQLite hits: a fresh cache object on the same file has an empty memory front.
    await cache.close()
    cache = CompletionCache(path, max_entries=entries * 2, max_bytes=1 << 34, ttl_s=86400)
    await cache.open()
    disk = []
    for k in rng.sample(keys, samples):
        t = time.perf_counter()
        hit = await cache.lookup(k)
        disk.append(time.perf_counter() - t)
        assert hit and hit.layer == "sqlite"

    miss = []
    for i in range(samples):
        k = make_key(rng, entries + i, base)
        t = time.perf_counter()
        assert await cache.lookup(k) is None
        miss.append(time.perf_counter() - t)
    await cache.close()
    size = path.stat().st_size

    def row(xs: list[float]) -> dict:
        ms = [x * 1000 for x in xs]
        return {"p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99), "mean_ms": statistics.fmean(ms), "n": len(ms)}

    result = {
        "entries": entries,
        "file_bytes": size,
        "fill_s": fill_s,
        "memory_hit": row(mem),
        "sqlite_hit": row(disk),
        "miss_full_lookback": row(miss),
        "write_put_on_keystroke_path": row(put_s),
        "write_flush_per_row_background": row(flush_s),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=100_000)
    ap.add_argument("--samples", type=int, default=2000)
    ap.add_argument("--out", type=Path, default=Path("bench-results/cache.json"))
    a = ap.parse_args()
    r = asyncio.run(run(a.entries, a.samples, a.out))
    print(
        f"completion cache at {r['entries']:,} entries ({r['file_bytes'] / 1e6:.1f} MB file, filled in {r['fill_s']:.1f} s)"
    )
    print(f"{'operation':44} {'p50 ms':>9} {'p99 ms':>9}")
    for name, label in (
        ("memory_hit", "lookup, memory hit"),
        ("sqlite_hit", "lookup, SQLite hit (memory front empty)"),
        ("miss_full_lookback", "lookup, miss (full look-back)"),
        ("write_put_on_keystroke_path", "write: put() on the keystroke path"),
        ("write_flush_per_row_background", "write: batched flush per row, background"),
    ):
        print(f"{label:44} {r[name]['p50_ms']:9.3f} {r[name]['p99_ms']:9.3f}")
    print(f"JSON: {a.out}")


if __name__ == "__main__":
    main()
