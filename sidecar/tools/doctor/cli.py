"""``sidecar doctor``'s command line (``sidecar/cli.py`` hands every word after ``doctor``
to :func:`main`; ``python -m sidecar.tools.doctor`` runs it too): parse the options, load
the configuration, run the checks, print the report with every API key redacted. The configuration is
resolved as ``serve`` resolves it (``config/resolve.py`` ``resolve_settings``). Exit
code 0 when no check FAILs, 1 otherwise (WARN does not change it). See
docs/architecture.md (``tools/``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

from ... import config
from .base import DEFAULT_TIMEOUT_S, ENGINE_CHECK_S, FAIL, _redact
from .core import Doctor
from .render import render_json, render_text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sidecar doctor",
        description="Check the configuration, the cloud backend (round trip, key, FIM, TTFT), the local engine, "
        "the GPU and the cache, and say what to fix. Exit code 1 when a check fails.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="S",
        help=f"seconds to wait for each network check (default {DEFAULT_TIMEOUT_S:g})",
    )
    engine = parser.add_mutually_exclusive_group()
    engine.add_argument(
        "--engine",
        dest="engine",
        action="store_const",
        const=True,
        default=None,
        help="run the engine check even when the local engine is not in use (it runs by default "
        "whenever the managed engine is set up)",
    )
    engine.add_argument(
        "--no-engine",
        dest="engine",
        action="store_const",
        const=False,
        help="skip the engine check (starting the local engine and running a real prompt)",
    )
    parser.add_argument(
        "--engine-timeout",
        type=float,
        default=ENGINE_CHECK_S,
        metavar="S",
        help=f"overall bound of the engine check in seconds (default {ENGINE_CHECK_S:g})",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.timeout > 0:
        parser.error("--timeout must be above 0")
    if not args.engine_timeout > 0:
        parser.error("--engine-timeout must be above 0")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

    from ...config import resolve_settings

    # As serve resolves them: what it ignores (a bad or contradicting setting, an
    # unreadable file) is one WARN, and every check runs on the rest.
    settings, ignored = resolve_settings()
    doctor = Doctor(
        settings, timeout_s=args.timeout, engine=args.engine, ignored=ignored, engine_timeout_s=args.engine_timeout
    )
    checks = asyncio.run(doctor.run())
    code = 1 if any(c.status == FAIL for c in checks) else 0
    out = render_json(checks, code) if args.json else render_text(checks, code)
    secrets = [os.environ.get(v, "") for v, k in config.ENV_VARS.items() if k == "api_key"]
    if settings is not None and settings.api_key:
        secrets.append(settings.api_key)
    sys.stdout.write(_redact(out, secrets))
    sys.stdout.flush()
    return code
