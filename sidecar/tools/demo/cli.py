"""Command-line options of ``sidecar demo`` / ``python -m sidecar.tools.demo``."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError("must be greater than 0")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError("expected KEY=VALUE")
    return key, value


#: What ``sidecar demo --help`` says the command does (plain text: argparse prints it as is).
DESCRIPTION = (
    "Type into a file through a real LSP session with the sidecar server and show each inline "
    "suggestion with its time to arrive. Exit status 0 only when suggestions were shown, every "
    "request was answered and the engine did not crash; 1 otherwise (the summary's FAIL line "
    "says why)."
)

#: ``--tiny``: the managed engine's model setting and the shipped model it names.
TINY_ENV = ("SIDECAR_LOCAL_MODEL", "smollm2-135m")


def demo_env(pairs: list[tuple[str, str]] | None, tiny: bool = False) -> dict[str, str] | None:
    """The extra server environment for ``--env`` ``pairs`` (later ones win) and ``--tiny``:
    ``SIDECAR_LOCAL_MODEL=smollm2-135m`` (the shipped SmolLM2-135M instead of the installed
    code model) unless ``pairs`` set ``SIDECAR_LOCAL_MODEL`` themselves. None when empty."""
    env = dict(pairs) if pairs else {}
    if tiny:
        env.setdefault(*TINY_ENV)
    return env or None


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the demo's options to ``parser`` (for a ``demo`` subcommand)."""
    parser.add_argument(
        "file",
        nargs="?",
        default=None,
        help="source file to type into (default: the bundled fixtures/demo/inventory.py)",
    )
    parser.add_argument(
        "--pauses", type=_count, default=8, help="times the typist stops and asks for a suggestion (default 8)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed for the region, the pauses and the typing rhythm (default 0)"
    )
    parser.add_argument(
        "--speed",
        type=_positive_float,
        default=1.0,
        help="typing speed factor; 1.0 is about 8 keys/s, 50 for quick checks",
    )
    parser.add_argument(
        "--server-command",
        type=shlex.split,
        default=None,
        metavar="CMD",
        help="command that starts the LSP server on stdio (default: python -m sidecar serve)",
    )
    parser.add_argument(
        "--env",
        type=_env_pair,
        action="append",
        default=None,
        metavar="KEY=VALUE",
        help="extra environment variable for the server (repeatable)",
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="run the local engine on the shipped SmolLM2-135M (nothing to download, "
        "weak suggestions) instead of the installed code model: sets "
        "SIDECAR_LOCAL_MODEL=smollm2-135m for the server unless --env sets it",
    )
    parser.add_argument("--json-out", default=None, metavar="PATH", help="also write the summary as JSON to PATH")
    parser.add_argument(
        "--request-timeout",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="longest wait for one suggestion (default 60; the cold start gets twice that)",
    )
    return parser


def run_from_args(args: argparse.Namespace) -> int:
    """Run the demo for parsed ``args``. Exit status 0 only when at least one suggestion
    was shown, every request was answered and the server reported no engine crash and no
    error (the summary's ``ok``; its FAIL line says why not); 1 otherwise, 2 for bad
    arguments, 130 when interrupted."""
    from .runner import run_demo

    env = demo_env(getattr(args, "env", None), tiny=bool(getattr(args, "tiny", False)))
    try:
        summary = asyncio.run(
            run_demo(
                file=args.file,
                pauses=args.pauses,
                seed=args.seed,
                speed=args.speed,
                server_command=args.server_command,
                env=env,
                json_out=args.json_out,
                request_timeout=args.request_timeout,
            )
        )
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except (OSError, ValueError) as exc:
        print(f"sidecar demo: {exc}", file=sys.stderr)
        return 2
    return 0 if summary["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m sidecar.tools.demo``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="sidecar demo", description=DESCRIPTION)
    add_arguments(parser)
    return run_from_args(parser.parse_args(argv))
