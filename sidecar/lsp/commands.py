"""What the ``sidecar.*`` commands do beyond one call into the service: the stats
payload (also kept in the stats file for ``sidecar stats``) and the run-time mode switch
(cloud, local, auto). docs/operations.md "Protocol" lists the commands. See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from ..completion.stats import completion_stats
from ..config import ConfigError, Settings, build
from ..observability.strictjson import finite

if TYPE_CHECKING:
    from .server import SidecarServer

log = logging.getLogger(__name__)


async def stats_payload(ls: SidecarServer) -> dict[str, Any]:
    """What ``sidecar.stats`` returns (and the stats file holds): counters, latency
    percentiles in ms, cache, acceptance, prefetch and runtime figures. A figure that is
    not a finite number is null (strict JSON, observability/strictjson.py)."""
    if ls.service is None:
        return {"ready": False}
    snap = await completion_stats(ls.service)
    snap["runtime"] = {
        "tasks": len(asyncio.all_tasks()),
        # Handler futures pygls holds (requests in progress; see SidecarProtocol._execute_handler).
        "request_futures": len(ls.protocol._request_futures),
        **snap["runtime"],
    }
    # The workspace index (completion/crossfile/workspace.py): "off" while the setting is.
    snap["workspace_index"] = ls.index.stats() if ls.index_enabled else {"state": "off"}
    clean: dict[str, Any] = finite(snap)
    return clean


async def write_stats_forever(ls: SidecarServer, every_s: float = 2.0) -> None:
    """Keep ``<state dir>/sidecar/stats/<pid>.json`` current for ``sidecar stats``."""
    from ..observability import statsfile

    last = None
    while True:
        try:
            snap = await stats_payload(ls)
            counters = snap.get("counters")
            if counters != last:
                statsfile.write(os.getpid(), snap)
                last = dict(counters or {})
        except Exception:  # noqa: BLE001 - stats are best effort
            log.debug("stats file update failed", exc_info=True)
        await asyncio.sleep(every_s)


async def switch_mode(ls: SidecarServer, mode: str) -> dict[str, Any]:
    """Switch between the cloud backend, the local engine and ``auto`` at run time. Open
    documents are kept; the old backend's streams are closed; cache keys carry backend and
    model, so results never mix; ``sidecar/status`` tells the editor.

    The mode already in use changes nothing (``"changed": false``: the backend and its
    streams stay). A mode the settings cannot serve (``local_engine = "ollama"`` without
    ``local_url``; the cloud without a cloud backend) is refused: ``"changed": false``
    with the reason in ``message``, one warning, the previous mode kept."""
    current = ls.settings()
    layer = {"mode": mode}
    try:
        candidate = build(*ls.base_layers, ls.init_layer, ls.change_layer, layer)
    except ConfigError as exc:
        reason = str(exc).removeprefix("invalid settings: ")
        return _refused(ls, current, f"cannot switch to {mode} mode: {reason}")
    if mode in ("cloud", "auto") and candidate.cloud_provider is None:
        if candidate.base_url_error:
            return _refused(
                ls, current, f"{mode} mode needs a cloud backend, and there is none: {candidate.base_url_error}"
            )
        return _refused(ls, current, f"{mode} mode needs a cloud backend (SILICONFLOW_API_KEY or SIDECAR_BASE_URL)")
    ls.mode_layer = layer
    # The mode in use: no new backend (config.backend_changed compares resolved modes).
    changed = await ls.service.apply_settings(candidate) if ls.service else False
    status = ls.service.status("starting" if changed else "ready") if ls.service else {}
    return {**status, "mode": mode, "changed": changed}


def _refused(ls: SidecarServer, current: Settings, message: str) -> dict[str, Any]:
    """A mode switch that cannot be made: one warning (logged and shown), the mode in use kept."""
    message = f"{message}; staying in {current.resolved_mode} mode"
    log.warning("%s", message)
    ls.show(types.MessageType.Warning, message)
    return {"mode": current.resolved_mode, "changed": False, "message": message}
