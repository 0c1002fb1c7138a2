"""What every backend takes and gives: an upstream request and a stream of text deltas."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol


@dataclass
class UpstreamRequest:
    """One request as the backend will send it.

    ``endpoint`` is relative to the base URL (``completions`` or ``chat/completions``);
    ``body`` is the JSON body without ``model`` and ``stream`` (the backend adds them);
    ``strategy`` names how the prompt was built (``suffix``, ``template``, ``chat``, ``prefix``).
    """

    endpoint: str
    body: dict[str, Any]
    strategy: str

    @property
    def used_suffix(self) -> bool:
        return "suffix" in self.body and self.endpoint == "completions"


@dataclass
class StreamInfo:
    """Timing and facts about one upstream stream. Times are ``time.perf_counter()`` seconds."""

    sent_at: float = 0.0
    headers_at: float = 0.0
    first_token_at: float = 0.0
    ended_at: float = 0.0
    trace_id: str | None = None
    finish_reason: str | None = None
    events: int = 0
    malformed_events: int = 0
    truncated: bool = False  # the connection ended without [DONE]
    usage: dict[str, Any] = field(default_factory=dict)

    @property
    def ttft_ms(self) -> float | None:
        if not self.first_token_at:
            return None
        return (self.first_token_at - self.sent_at) * 1000.0


class Backend(Protocol):
    """A place completions come from. ``name`` is shown to users; ``model`` is the model id."""

    name: str
    model: str
    kind: str  # "siliconflow" | "openai" | "local"

    async def ensure_ready(self) -> None:
        """Wait until the backend can take a request (a managed engine may still be loading).

        Raises BackendError when it cannot become ready.
        """

    def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncIterator[str]:
        """Yield completion text deltas as they arrive; closing the iterator closes the
        upstream connection. Raises BackendError on an HTTP or transport failure."""

    async def prewarm(self) -> None:
        """Open a pooled connection ahead of need. Never raises."""

    async def aclose(self) -> None:
        """Release connections and child processes."""
