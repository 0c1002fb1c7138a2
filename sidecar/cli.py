"""The ``sidecar`` command: ``serve`` (stdio LSP), ``demo``, ``config``, ``cache``,
``stats``, ``doctor``, ``install-editor``, ``model``. (The simulator and the benchmarks
are development tools, run from a clone: ``python -m devtools.simulator``,
``python -m devtools.bench``.)"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import __version__, config, logsetup


def _serve(_args: argparse.Namespace) -> int:
    from .observability.redact import RedactingStream

    sys.stderr = RedactingStream(sys.stderr)  # tracebacks and stray prints too: no secret leaves
    logsetup.setup()
    errors: list[str] = []
    layers = []
    try:
        layers.append(config.from_file(errors=errors))
    except config.ConfigError as exc:  # not TOML at all
        errors.append(str(exc))
        layers.append({})
    layers.append(config.from_env(errors=errors))
    log_file = layers[0].get("log_file") or layers[1].get("log_file") or ""
    if log_file.lower() != "off":
        from .observability.logs import add_json_file

        add_json_file(Path(log_file) if log_file else None)
    from .lsp.server import create_server

    server = create_server(layers, errors)
    # stdout is the protocol channel: hand its buffer to pygls, then point sys.stdout at
    # stderr so a stray print() in any library cannot corrupt the stream.
    out = sys.stdout.buffer
    sys.stdout = sys.stderr
    from .lsp.stdio import start_io

    try:
        code = start_io(server, sys.stdin.buffer, out)  # our reader: never deaf (framing.py)
    finally:
        from .observability import statsfile

        statsfile.remove(os.getpid())
        svc = server.service
        if svc is not None:
            engine = svc.backend.engine
            if engine is not None:
                engine.stop_sync()
            if svc.cache is not None and svc.cache.store is not None:
                svc.cache.store.stop_sync()
                svc.cache.store.flush_sync()
    return code


def _demo(args: argparse.Namespace) -> int:
    from .tools.demo.cli import run_from_args

    return run_from_args(args)


def _settings() -> config.Settings | None:
    """Settings from the config file and environment, as ``serve`` resolves them; what
    was ignored is one line each on stderr."""
    settings, notes = config.resolve_settings()
    for note in notes:
        print(f"sidecar: {note}", file=sys.stderr)
    return settings


def _config(_args: argparse.Namespace) -> int:
    s = _settings()
    if s is None:
        return 2
    print(json.dumps({"config_file": str(config.config_file_path()), **s.public_dict()}, indent=2))
    return 0


def _cache(args: argparse.Namespace) -> int:
    import asyncio

    from .completion.cache import CompletionCache

    s = _settings()
    if s is None:
        return 2
    path = s.resolved_cache_path
    if not path.exists():
        print(json.dumps({"path": str(path), "entries": 0, "bytes": 0, "exists": False}, indent=2))
        return 0

    async def run() -> dict:
        cache = CompletionCache(path, max_entries=s.cache_max_entries, max_bytes=s.cache_max_bytes, ttl_s=s.cache_ttl_s)
        await cache.open()
        try:
            if args.action == "clear":
                return {"path": str(path), "cleared": await cache.clear()}
            st = await cache.stats()
            return {"path": str(path), **st["disk"], "persistent": st["persistent"]}
        finally:
            await cache.close()

    print(json.dumps(asyncio.run(run()), indent=2))
    return 0


def _stats(_args: argparse.Namespace) -> int:
    from .observability import statsfile

    running = statsfile.read_all()
    if not running:
        print("no running sidecar has written stats (each writes them every 2 s while serving)", file=sys.stderr)
        print(json.dumps({}, indent=2))
        return 1
    print(json.dumps({str(pid): st for pid, st in running.items()}, indent=2))
    return 0


def _model(args: argparse.Namespace) -> int:
    from .models.cli import run

    return run(args)


#: What ``sidecar --help`` says. Help text is printed as written, so it is plain text:
#: no reStructuredText or Markdown markup (``tests/unit/test_cli_help.py``).
DESCRIPTION = (
    "The sidecar command: serve runs the LSP server on stdio; demo, config, cache, stats, "
    "doctor, install-editor and model are tools around it. The simulator and the "
    "benchmarks are development tools, run from a clone: python -m devtools.simulator, "
    "python -m devtools.bench."
)


def _command(sub: argparse._SubParsersAction, name: str, text: str) -> argparse.ArgumentParser:
    """A subcommand whose ``--help`` opens with the line the command list shows."""
    return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")


def build_parser() -> argparse.ArgumentParser:
    """The ``sidecar`` argument parser. ``install-editor`` and ``doctor`` are listed here
    but parse their own options (:func:`main` hands them every word after the command)."""
    parser = argparse.ArgumentParser(prog="sidecar", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"sidecar {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = _command(sub, "serve", "run the LSP server on stdio")
    p.add_argument(
        "--stdio", action="store_true", help="accepted for vscode-languageclient; stdio is the only transport"
    )
    p.set_defaults(fn=_serve)
    from .tools.demo.cli import DESCRIPTION as DEMO_DESCRIPTION
    from .tools.demo.cli import add_arguments as demo_arguments

    p = sub.add_parser(
        "demo",
        help="type into a real file through a real LSP client and show suggestions",
        description=DEMO_DESCRIPTION,
    )
    demo_arguments(p)
    p.set_defaults(fn=_demo)
    sub.add_parser("install-editor", help="set up vscode, cursor, neovim, emacs or helix (see install-editor --help)")
    sub.add_parser(
        "doctor",
        help="check configuration, key, round trip, FIM, TTFT, local engine, GPU and cache (see doctor --help)",
    )
    p = _command(sub, "config", "print the resolved configuration (API key redacted)")
    p.set_defaults(fn=_config)
    p = _command(sub, "stats", "print the figures of the running sidecars (JSON, as sidecar.stats)")
    p.set_defaults(fn=_stats)
    p = _command(sub, "cache", "show or clear the completion cache file")
    p.add_argument(
        "action",
        choices=("stats", "clear"),
        help="stats: the file's path, entries and size (JSON); clear: delete every entry",
    )
    p.set_defaults(fn=_cache)
    from .models.cli import add_arguments as model_arguments

    p = _command(sub, "model", "list, pull, use, locate or remove local code models (see model ACTION --help)")
    model_arguments(p)
    p.set_defaults(fn=_model)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "install-editor":  # its own parser owns every option after the word
        from .tools.install_editor import main as install_editor_main

        return install_editor_main(argv[1:])
    if argv and argv[0] == "doctor":  # its own parser owns every option after the word
        from .tools.doctor import main as doctor_main

        return doctor_main(argv[1:])
    args = parser.parse_args(argv)
    return int(args.fn(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
