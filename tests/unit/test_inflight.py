"""InflightStream lifecycle on a real event loop (no backend: the pump is a coroutine)."""

from __future__ import annotations

import asyncio

from sidecar.completion.context import CompletionContext
from sidecar.completion.inflight import InflightStream


def _stream() -> InflightStream:
    ctx = CompletionContext(prefix="x = ", suffix="", line_prefix="x = ", line_suffix="",
                            language="python", eol="\n")
    return InflightStream("file:///a.py", ctx, "x = ", "")


async def test_stream_closed_before_its_first_step_still_ends():
    # The cancel-storm leak: a stream closed in the same loop turn it was started in
    # never ran its body, so it stayed "running" forever and its end hook never ran.
    ended = []
    started = []

    async def pump(filt, on_delta):
        started.append(True)
        await asyncio.sleep(10)
        return "complete"

    s = _stream()
    s.run(pump, ended.append)
    assert s.close()
    waiter = s.changed()
    await asyncio.wait_for(waiter, 1)
    assert not started
    assert s.done and s.outcome == "aborted" and s.aborted
    assert ended == [s]


async def test_stream_end_hook_runs_once():
    ended = []

    async def pump(filt, on_delta):
        return "complete"

    s = _stream()
    s.run(pump, ended.append)
    await s.task
    await asyncio.sleep(0)
    assert s.done and s.outcome == "complete"
    assert ended == [s]
