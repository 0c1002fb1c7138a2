"""Command line: ``python -m devtools.simulator --port 8123 [--ttft-ms 400 ...]``.

Serves until SIGINT or SIGTERM. The base URL is logged to stderr (and written to
``--url-file`` if given, which helps with ``--port 0``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from .latency import LatencyModel
from .server import DEFAULT_MODEL, DEFAULT_OUTPUT, SimulatedBackend
from .shared_engine import EngineConfig

logger = logging.getLogger("devtools.simulator")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m devtools.simulator",
        description="Simulated OpenAI/SiliconFlow-compatible completion backend.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8123, help="TCP port; 0 picks a free one (default 8123)")
    p.add_argument("--ttft-ms", type=float, default=400.0, help="median time to first token, ms (default 400)")
    p.add_argument("--ttft-jitter", type=float, default=0.0, help="log-normal sigma of the TTFT (default 0)")
    p.add_argument("--tokens-per-s", type=float, default=50.0, help="decoding speed, tokens/s (default 50)")
    p.add_argument("--seed", type=int, default=0, help="seed of the latency model (default 0)")
    p.add_argument("--model", default=DEFAULT_MODEL, help=f"model id to list (default {DEFAULT_MODEL})")
    p.add_argument("--api-key", default=None, help="if set, require 'Authorization: Bearer KEY'")
    p.add_argument("--output", default=DEFAULT_OUTPUT, help="default output text")
    e = p.add_argument_group("shared engine (see devtools/simulator/shared_engine.py)")
    e.add_argument(
        "--engine-capacity",
        type=int,
        default=None,
        metavar="N",
        help="pace /v1 generation by a shared engine running N sequences at once "
        "(a FIFO queue beyond, a prefix cache, batched decoding); off by default",
    )
    e.add_argument(
        "--prefill-tps", type=float, default=2000.0, help="engine: shared prefill speed, prompt tokens/s (default 2000)"
    )
    e.add_argument(
        "--decode-tps",
        type=float,
        default=50.0,
        help="engine: decoding speed of one sequence alone, tokens/s (default 50)",
    )
    e.add_argument(
        "--batch-slowdown",
        type=float,
        default=0.1,
        help="engine: extra step time per additional sequence, fraction (default 0.1)",
    )
    e.add_argument(
        "--engine-overhead-ms", type=float, default=30.0, help="engine: constant per-request overhead, ms (default 30)"
    )
    e.add_argument("--rpm", type=int, default=None, help="requests per minute before 429 (default: no limit)")
    e.add_argument("--tpm", type=int, default=None, help="tokens per minute before 429 (default: no limit)")
    p.add_argument("--url-file", type=Path, default=None, help="write the base URL to this file once listening")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    return p


async def _serve(args: argparse.Namespace) -> None:
    latency = LatencyModel(
        ttft_ms=args.ttft_ms, ttft_jitter=args.ttft_jitter, tokens_per_s=args.tokens_per_s, seed=args.seed
    )
    sim = SimulatedBackend(
        latency, host=args.host, port=args.port, model=args.model, api_key=args.api_key, default_output=args.output
    )
    if args.engine_capacity is not None:
        sim.set_engine(
            EngineConfig(
                capacity=args.engine_capacity,
                prefill_tps=args.prefill_tps,
                decode_tps=args.decode_tps,
                batch_slowdown=args.batch_slowdown,
                overhead_ms=args.engine_overhead_ms,
            )
        )
    if args.rpm is not None or args.tpm is not None:
        sim.set_rate_limits(args.rpm, args.tpm)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await sim.start()
    try:
        if args.url_file is not None:
            args.url_file.write_text(sim.base_url + "\n")
        logger.info("serving %s (control: %s/_sim/); stop with SIGINT or SIGTERM", sim.base_url, sim.url)
        await stop.wait()
    finally:
        await sim.stop()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    try:
        asyncio.run(_serve(args))
    except ValueError as exc:  # bad latency, engine or limit parameters
        logger.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
