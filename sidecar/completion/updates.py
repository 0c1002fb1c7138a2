"""Update notifications: after a request is answered while its stream still runs, the
growing suggestion goes to the editor as ``sidecar/inlineCompletionUpdate`` (docs/operations.md
"Protocol"), while the request is still its document's latest. Each update carries the
whole text so far for the request (its remainder after what was typed), a sequence
number from 1, and ``done: true`` on the last one. Only growth is sent (a text that does
not extend the last one waits for the end). Once the stream is over, the completion
that follows accepting it is speculated. See docs/architecture.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .request import Answer, Request

if TYPE_CHECKING:
    from ..metrics import Metrics
    from .session import DocSession

#: ``on_update(request, text, done, seq)`` sends one notification.
UpdateSink = Callable[[Request, str, bool, int], None]


def update_item_id(req_id: int, seq: int) -> str:
    """The id of the item an update carries: ``u<request id>.<seq>`` (the accept
    command's first argument when the user takes it)."""
    return f"u{req_id}.{seq}"


async def send_updates(
    doc: DocSession,
    req: Request,
    answer: Answer,
    on_update: UpdateSink,
    metrics: Metrics,
    speculate: Callable[[Request, str], None],
    judge: Callable[[str, bool], bool] | None = None,
) -> None:
    """Send ``req``'s updates from ``answer.stream`` until it ends or ``req`` is no longer
    ``doc.latest``; then ``speculate(req, final_text)``. ``judge(text, stream_done)``,
    when given (the request was answered with nothing yet: the confidence gate,
    gate.py), sees the first text once: False ends the updates with an empty final one
    and speculates nothing."""
    s = answer.stream
    assert s is not None
    last = answer.text
    seq = 0
    while doc.latest is req and not req.superseded.is_set():
        done = s.done
        text = s.remainder(answer.typed, req.ctx)
        if judge is not None and text:
            admitted, judge = judge(text, done), None
            if not admitted:
                on_update(req, "", True, seq + 1)
                return
        if text != last or done:
            if text.startswith(last) or done:
                seq += 1
                on_update(req, text, done, seq)
                metrics.count("sched.updates_sent")
                last = text
        if done:
            speculate(req, text)
            return
        await s.changed()


async def speculate_when_done(
    doc: DocSession, req: Request, answer: Answer, speculate: Callable[[Request, str], None]
) -> None:
    """For a client without updates: once ``answer.stream`` is over (and ``req`` still
    the latest), ``speculate(req, answer.text)``."""
    s = answer.stream
    assert s is not None
    while not s.done and doc.latest is req and not req.superseded.is_set():
        await s.changed()
    if s.done and doc.latest is req and not req.superseded.is_set():
        speculate(req, answer.text)
