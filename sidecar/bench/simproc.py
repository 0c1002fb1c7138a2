"""The benchmark's simulated backend, run as its own process.

``python -m sidecar.bench.simproc SPEC.json``: serves a :class:`SimulatedBackend` whose
responder is the :class:`~sidecar.bench.truth.Oracle` for the files in the spec, writes
its base URL to ``spec["url_file"]`` once listening, and serves until SIGTERM/SIGINT.
The bench reads the request records through ``GET /_sim/requests``.

A separate process keeps the backend's work (pacing hundreds of SSE streams in the
naive run) off the bench client's event loop, whose timestamps are the measurements;
a real backend is on another machine anyway.

Spec keys: ``files`` (list of :meth:`TrueFile.to_dict`), ``seed``, ``wrong_rate``,
``latency`` (:meth:`LatencyModel.to_dict` keys), ``url_file``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

from ..simulator import LatencyModel, SimulatedBackend
from .truth import Oracle, TrueFile


async def serve(spec: dict) -> None:
    files = [TrueFile(**f) for f in spec["files"]]
    oracle = Oracle(files, seed=int(spec.get("seed", 0)), wrong_rate=float(spec.get("wrong_rate", 0.25)))
    latency = LatencyModel.from_dict(spec.get("latency") or {})
    sim = SimulatedBackend(latency, responder=oracle.respond)
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
            print(f"simproc: {oracle.misses} prompts matched no file", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m sidecar.bench.simproc SPEC.json", file=sys.stderr)
        return 2
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    spec = json.loads(Path(args[0]).read_text(encoding="utf-8"))
    asyncio.run(serve(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
