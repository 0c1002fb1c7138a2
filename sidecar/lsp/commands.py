"""What the ``sidecar.*`` commands do beyond one call into the service: the stats
payload (also kept in the stats file for ``sidecar stats``) and the run-time mode switch
(cloud, local, auto). docs/operations.md "Protocol" lists the commands. See docs/architecture.md.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from lsprotocol import types

from ..config import build
from ..observability.stats import completion_stats
from ..observability.strictjson import finite

log = logging.getLogger(__name__)


async def stats_payload(ls: Any) -> dict[str, Any]:
    """What ``sidecar.stats`` returns (and the stats file holds): counters, latency
    percentiles in ms, cache, acceptance, prefetch and runtime figures. A figure that is
    not a finite number is null (strict JSON, observability/strictjson.py)."""
    if ls.service is None:
        return {"ready": False}
    snap = await completion_stats(ls.service)
    snap["runtime"] = {
        "tasks": len(asyncio.all_tasks()),
        # Handler futures pygls holds (requests in progress; see SidecarProtocol._execute_handler).
        "request_futures": len(getattr(ls.protocol, "_request_futures", ())),
        **snap["runtime"],
    }
    return finite(snap)


async def write_stats_forever(ls: Any, every_s: float = 2.0) -> None:
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



async def switch_mode(ls: Any, mode: str) -> dict[str, Any]:
    """Switch between the cloud backend, the local engine and ``auto`` at run time. Open
    documents are kept; the old backend's streams are closed; cache keys carry backend and
    model, so results never mix; ``sidecar/status`` tells the editor."""
    layer = {"mode": mode}
    candidate = build(*ls.base_layers, ls.init_layer, ls.change_layer, layer)
    if mode in ("cloud", "auto") and candidate.cloud_provider is None:
        msg = f"{mode} mode needs a cloud backend (SILICONFLOW_API_KEY or SIDECAR_BASE_URL); staying in local mode"
        ls.show(types.MessageType.Warning, msg)
        return {"mode": "local", "changed": False, "message": msg}
    ls.mode_layer = layer
    changed = await ls.service.apply_settings(candidate) if ls.service else False
    status = ls.service.status("starting" if changed else "ready") if ls.service else {}
    return {**status, "mode": mode, "changed": changed}
