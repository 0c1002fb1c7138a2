"""The ``sidecar.stats`` payload of a completion service: counters, latency percentiles
(ms), cache, acceptance, prefetch, status and the scheduler's runtime figures (docs/operations.md
"Observability"). The LSP surface adds its own runtime figures (``lsp/commands.py``).
"""

from __future__ import annotations

from typing import Any

from ..completion import retention


async def completion_stats(service: Any) -> dict[str, Any]:
    """The ``sidecar.stats`` payload: counters, latency percentiles in ms, cache,
    acceptance, prefetch, status and the scheduler's runtime figures."""
    snap = service.metrics.snapshot()
    snap["cache"] = await service.cache.stats() if service.cache else {"enabled": False}
    c = snap["counters"]
    shown = c.get("suggestions.shown", 0)
    snap["acceptance"] = {
        "shown": shown,
        "accepted": c.get("accepted", 0),
        "accepted_chars": c.get("accepted_chars", 0),
        # Accept commands for an item never shown or long forgotten: not in the rate.
        "unknown": c.get("accepted_unknown", 0),
        "rate": (c.get("accepted", 0) / shown) if shown else None,
        # Accepted characters still in the document at each horizon (completion/retention.py).
        "retained": retention.summary(c),
        "following": service.retention.following(),
    }
    snap["gate"] = service.gate.summary()
    snap["prefetch"] = {k.split(".", 1)[1]: v for k, v in c.items() if k.startswith("prefetch.")}
    snap["status"] = service.status("ready")
    snap["runtime"] = {**service.scheduler.snapshot(), "busy_connections": service.backend.busy_connections()}
    return snap
