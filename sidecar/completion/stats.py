"""The ``sidecar.stats`` payload of a completion service: counters, latency percentiles
(ms), cache, acceptance, prefetch, status and the scheduler's runtime figures (docs/operations.md
"Observability"). The LSP surface adds its own runtime figures (``lsp/commands.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import retention

if TYPE_CHECKING:
    from .service import CompletionService


async def completion_stats(service: CompletionService) -> dict[str, Any]:
    """The ``sidecar.stats`` payload: counters, latency percentiles in ms, cache,
    acceptance, prefetch, status and the scheduler's runtime figures."""
    snap = service.metrics.snapshot()
    snap["cache"] = await service.cache.stats() if service.cache else {"enabled": False}
    c = snap["counters"]
    shown = c.get("suggestions.shown", 0)
    displayed = c.get("suggestions.displayed", 0)
    # The rate is over what the editor displayed where it reports that (accepts of
    # suggestions it reported displayed), else over answers.
    basis = displayed if displayed else shown
    taken = c.get("accepted.displayed", 0) if displayed else c.get("accepted", 0)
    snap["acceptance"] = {
        "shown": shown,  # answered with a suggestion (once per request)
        "displayed": displayed,  # reported displayed by the editor (once per suggestion)
        "accepted": c.get("accepted", 0),  # suggestions with any accept (once each)
        "full": c.get("accepts.full", 0),  # accept commands that took all of the item shown
        "partial": c.get("accepts.partial", 0),  # accept commands that took a part (a word, a line)
        "accepted_chars": c.get("accepted_chars", 0),
        "full_chars": c.get("accepted_chars.full", 0),
        "partial_chars": c.get("accepted_chars.partial", 0),
        # Accept commands for an item never shown or long forgotten: not in the rate.
        "unknown": c.get("accepted_unknown", 0),
        "rate": (taken / basis) if basis else None,
        "rate_of": "displayed" if displayed else "shown",
        # Accepted characters still in the document at each horizon (completion/retention.py).
        "retained": retention.summary(c),
        "following": service.retention.following(),
    }
    snap["gate"] = service.gate.summary()
    snap["prefetch"] = {k.split(".", 1)[1]: v for k, v in c.items() if k.startswith("prefetch.")}
    snap["status"] = service.status(service.health)
    snap["runtime"] = {**service.scheduler.snapshot(), "busy_connections": service.backend.busy_connections()}
    return snap
