"""How ``sidecar stats`` reads a running sidecar: each sidecar process writes its
``sidecar.stats`` figures to ``<platform state dir>/sidecar/stats/<pid>.json`` every 2 s
while they change, and removes the file when it exits. The CLI reads the files of live
processes (a file whose pid is gone is stale and skipped)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import platformdirs

from .strictjson import dumps


def stats_dir() -> Path:
    return Path(platformdirs.user_state_dir("sidecar")) / "stats"


def write(pid: int, payload: dict[str, Any]) -> None:
    """Write atomically (temp file + rename); errors are ignored (stats are best effort)."""
    d = stats_dir()
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{pid}.tmp"
        tmp.write_text(dumps(payload, default=str))  # strict JSON: NaN is written as null
        os.chmod(tmp, 0o600)
        os.replace(tmp, d / f"{pid}.json")
    except OSError:
        pass


def remove(pid: int) -> None:
    try:
        (stats_dir() / f"{pid}.json").unlink()
    except OSError:
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_all() -> dict[int, dict[str, Any]]:
    """``{pid: stats}`` of the sidecars running now."""
    out: dict[int, dict[str, Any]] = {}
    d = stats_dir()
    if not d.is_dir():
        return out
    for p in d.glob("*.json"):
        try:
            pid = int(p.stem)
        except ValueError:
            continue
        if not _alive(pid):
            continue
        try:
            out[pid] = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
    return out
