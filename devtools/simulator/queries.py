"""What a test reads and waits for: the recorded requests and their ends and disconnects. A
part of :class:`.server.SimulatedBackend` (a mixin: it uses the server's recorder,
faults, latency model and state)."""

from __future__ import annotations

from collections.abc import Callable

from .recorder import RecordedRequest


class RecordQueries:
    """What a test reads and waits for: the recorded requests and their ends and disconnects."""

    @property
    def requests(self) -> list[RecordedRequest]:
        """Records of requests (all but ``/_sim/...``) in arrival order (a new list of live records)."""
        return list(self._recorder.records)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> None:
        """Wait until ``predicate()`` holds; re-checked whenever a record changes.

        Raises:
            TimeoutError: after ``timeout`` seconds.
        """
        await self._recorder.wait_until(predicate, timeout, "the condition")

    async def wait_for_requests(self, n: int, timeout: float = 5.0, path: str | None = None) -> list[RecordedRequest]:
        """Wait until at least ``n`` requests (on ``path``, if given) have arrived.

        Returns the matching records. Raises TimeoutError after ``timeout`` seconds.
        """

        def matching() -> list[RecordedRequest]:
            return [r for r in self._recorder.records if path is None or r.path == path]

        await self._recorder.wait_until(lambda: len(matching()) >= n, timeout, f"{n} requests")
        return matching()

    async def wait_for_end(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Wait until request ``index`` has ended (any way). Returns its record.

        Raises TimeoutError after ``timeout`` seconds.
        """
        records = self._recorder.records
        await self._recorder.wait_until(
            lambda: index < len(records) and records[index].ended_at is not None,
            timeout,
            f"request #{index} to end",
        )
        return records[index]

    async def wait_for_disconnect(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Wait until request ``index`` ended because its client disconnected.

        Returns the record (``disconnected`` is true, ``disconnected_at`` set).

        Raises:
            TimeoutError: after ``timeout`` seconds.
            RuntimeError: if the request ended without a client disconnect.
        """
        records = self._recorder.records
        await self._recorder.wait_until(
            lambda: index < len(records) and (records[index].disconnected or records[index].ended_at is not None),
            timeout,
            f"request #{index} to be disconnected",
        )
        record = records[index]
        if not record.disconnected:
            raise RuntimeError(
                f"request #{index} ended without a client disconnect "
                f"(completed={record.completed}, fault={record.fault}, tokens_sent={record.tokens_sent})"
            )
        return record
