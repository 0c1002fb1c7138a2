"""Command line: ``python -m sidecar.simulator --port 8123 [--ttft-ms 400 ...]``.

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

logger = logging.getLogger("sidecar.simulator")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sidecar.simulator",
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
    except ValueError as exc:  # bad latency parameters
        logger.error("%s", exc)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
