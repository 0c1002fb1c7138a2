"""The benchmark's simulated backend, run as its own process.

``python -m devtools.bench.simproc SPEC.json``: serves a :class:`SimulatedBackend` whose
responder is the :class:`~devtools.bench.truth.Oracle` for the files in the spec, writes
its base URL to ``spec["url_file"]`` once listening, and serves until SIGTERM/SIGINT.
The bench reads the request records through ``GET /_sim/requests``.

A separate process keeps the backend's work (pacing hundreds of SSE streams in the
naive run) off the bench client's event loop, whose timestamps are the measurements;
a real backend is on another machine anyway.

Spec keys: ``files`` (list of :meth:`TrueFile.to_dict`), ``seed``, ``wrong_rate``,
``latency`` (:meth:`LatencyModel.to_dict` keys), ``url_file``; for the team bench
``engine`` (:class:`EngineConfig` keys) and ``rpm``/``tpm`` (None: no limit).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from ..simulator import EngineConfig, LatencyModel, SimulatedBackend
from .truth import Oracle, TrueFile


async def stop(proc: asyncio.subprocess.Process, log: Any) -> None:
    """Stop a simulator process started from this module (SIGTERM, then SIGKILL after
    5 s) and close its log file."""
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
            await proc.wait()
    log.close()


async def serve(spec: dict, name: str = "simproc") -> None:
    files = [TrueFile(**f) for f in spec["files"]]
    oracle = Oracle(files, seed=int(spec.get("seed", 0)), wrong_rate=float(spec.get("wrong_rate", 0.25)))
    # The replay passes ``latency``; the team bench passes ``engine`` (a shared engine
    # in front of /v1) and optionally ``rpm``/``tpm`` (429 with Retry-After).
    latency = LatencyModel.from_dict(spec["latency"]) if spec.get("latency") is not None else None
    sim = SimulatedBackend(latency, responder=oracle.respond)
    if spec.get("engine") is not None:
        sim.set_engine(EngineConfig.from_dict(spec["engine"]))
    if spec.get("rpm") is not None or spec.get("tpm") is not None:
        sim.set_rate_limits(spec.get("rpm"), spec.get("tpm"))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await sim.start()
    try:
        url_file = Path(spec["url_file"])
        tmp = url_file.with_suffix(".tmp")
        tmp.write_text(sim.base_url + "\n")
        tmp.replace(url_file)
        await stop.wait()
    finally:
        await sim.stop()
        if oracle.misses:
            print(f"{name}: {oracle.misses} prompts matched no file", file=sys.stderr)


def main(argv: list[str] | None = None, name: str = "simproc") -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(f"usage: python -m devtools.bench.{name} SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    asyncio.run(serve(spec, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
