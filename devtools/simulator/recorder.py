"""Records of the requests the simulated backend received, and waiting on them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})


def redact_headers(headers: Mapping[str, str]) -> tuple[dict[str, str], bool, str | None]:
    """Copy request headers without secrets.

    Returns ``(headers, auth_present, auth_scheme)``: header names are lower-cased;
    secret-bearing headers keep only their scheme (``"Bearer <redacted>"``);
    ``auth_present`` says whether an ``Authorization`` header was sent and
    ``auth_scheme`` is its first word (e.g. ``"Bearer"``) or ``None``.
    """
    clean: dict[str, str] = {}
    auth_present = False
    auth_scheme: str | None = None
    for name, value in headers.items():
        key = name.lower()
        if key in _SECRET_HEADERS:
            parts = value.strip().split(None, 1)
            scheme = parts[0] if len(parts) == 2 else None
            clean[key] = f"{scheme} <redacted>" if scheme else "<redacted>"
            if key == "authorization":
                auth_present = True
                auth_scheme = scheme
        else:
            clean[key] = value
    return clean, auth_present, auth_scheme


@dataclass
class RecordedRequest:
    """What happened to one request on a ``/v1/...`` or local-engine endpoint.

    Times are ``time.monotonic()`` values in **seconds** (comparable with the test's own
    ``time.monotonic()``); ``None`` until the event happened.

    Attributes:
        index: position in arrival order, from 0.
        path, method: e.g. ``"/v1/completions"``, ``"POST"``.
        body: the parsed JSON body (a dict), or ``None`` if absent or not a JSON object.
        headers: request headers, names lower-cased, secrets redacted (see ``redact_headers``).
        auth_present: an ``Authorization`` header was sent (its value is never kept).
        auth_scheme: its scheme, e.g. ``"Bearer"``.
        received_at: when the handler started.
        trace_id: the ``x-siliconcloud-trace-id`` sent back.
        stream: the body asked for ``"stream": true``.
        status: HTTP status sent (``None`` before the headers went out).
        first_token_at: when the first token event (or the non-stream body) was written.
        ended_at: when the handler finished, however it finished.
        tokens_sent: token events written (non-stream: tokens in the body once written).
        tokens_total: tokens the full answer would have had (after stop/max_tokens).
        text_sent: the text of the tokens written.
        finish_reason: ``"stop"`` / ``"length"`` once the final chunk was written.
        completed: ``data: [DONE]`` was written (non-stream: the whole body was written).
        disconnected: the client went away before the end.
        disconnected_at: when that was noticed.
        fault: kind of the fault applied (``"status"``, ``"stall"``, ...), or ``None``.
        client_port: the client's source port (requests on one keep-alive connection share it).
        prompt_tokens_cached, prompt_tokens_evaluated: for ``/infill`` with a timed prompt
            evaluation (``SimulatedBackend.set_infill_prefill``), the prompt tokens reused
            from the slot's KV cache and those evaluated now; ``None`` otherwise.
    """

    index: int
    path: str
    method: str
    body: dict | None
    headers: dict[str, str]
    auth_present: bool
    received_at: float
    auth_scheme: str | None = None
    trace_id: str = ""
    stream: bool = False
    status: int | None = None
    first_token_at: float | None = None
    ended_at: float | None = None
    tokens_sent: int = 0
    tokens_total: int = 0
    text_sent: str = ""
    finish_reason: str | None = None
    completed: bool = False
    disconnected: bool = False
    disconnected_at: float | None = None
    fault: str | None = None
    client_port: int | None = None  # the client's TCP port: equal ports mean one reused connection
    prompt_tokens_cached: int | None = None
    prompt_tokens_evaluated: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready copy of all fields."""
        return asdict(self)


@dataclass
class Recorder:
    """The list of records plus a way to wait for changes (single event loop only)."""

    records: list[RecordedRequest] = field(default_factory=list)
    _waiters: set[asyncio.Future] = field(default_factory=set, repr=False)

    def add(self, record: RecordedRequest) -> None:
        self.records.append(record)
        self.changed()

    def next_index(self) -> int:
        return len(self.records)

    def clear(self) -> None:
        self.records.clear()
        self.changed()

    def changed(self) -> None:
        """Wake every waiter so it re-checks its condition."""
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Return once ``predicate()`` is true; it is re-checked after each change.

        Raises:
            TimeoutError: after ``timeout`` seconds, with ``what`` in the message.
        """

        async def loop() -> None:
            while not predicate():
                fut = asyncio.get_running_loop().create_future()
                self._waiters.add(fut)
                try:
                    await fut
                finally:
                    self._waiters.discard(fut)

        try:
            await asyncio.wait_for(loop(), timeout)
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}") from None
