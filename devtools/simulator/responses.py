"""Writing the simulated backend's answers: whole bodies, streams (SSE or NDJSON), and faults.

Every function updates the request's :class:`RecordedRequest` as bytes go out. Client
disconnects surface as ``asyncio.CancelledError`` (aiohttp's handler cancellation) or
``ConnectionResetError`` (a write on a closed connection); the caller records them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from .faults import Fault
from .latency import LatencyModel
from .protocol import SSE_DONE, SSE_KEEPALIVE, SSE_MALFORMED, Shape, sse_event, usage
from .recorder import RecordedRequest
from .tokens import OutputPlan

logger = logging.getLogger(__name__)

TRACE_HEADER = "x-siliconcloud-trace-id"


def close_transport(request: web.Request) -> None:
    """Close the request's connection now (data already written is still flushed)."""
    transport = request.transport
    if transport is not None:
        transport.close()


#: What a ``drip`` fault trickles: a valid start of a streamed answer.
DRIP_BYTES = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    b'1e\r\ndata: {"choices": [{"text": "x"}]}\r\n'
)


async def hang_before_answering(request: web.Request, fault: Any) -> None:
    """A ``silent`` fault: nothing is sent until the client leaves. A ``drip`` fault: the
    raw bytes of an answer (:data:`DRIP_BYTES`) one every ``fault.keepalive_s`` seconds,
    written to the transport below aiohttp (no response object: the status line itself
    trickles), then nothing. Returns only by cancellation (the client left)."""
    transport = request.transport
    if fault.kind == "drip" and transport is not None:
        for i in range(len(DRIP_BYTES)):
            if transport.is_closing():
                break
            transport.write(DRIP_BYTES[i : i + 1])
            await asyncio.sleep(fault.keepalive_s or 1.0)
    while True:  # noqa: ASYNC110 - nothing to wait for: the handler is only ever cancelled
        await asyncio.sleep(3600)  # only cancelled: aiohttp cancels the handler when the client leaves


async def send(request: web.Request, record: RecordedRequest, resp: web.Response) -> web.Response:
    """Write a whole response now (with the trace header), so the record knows it went out."""
    resp.headers[TRACE_HEADER] = record.trace_id
    record.status = resp.status
    await resp.prepare(request)
    await resp.write_eof()
    return resp


async def send_status(
    request: web.Request, record: RecordedRequest, status: int, body: Any, headers: Any = ()
) -> web.Response:
    """Answer ``status`` with ``body``: a str goes as ``text/plain``, anything else as JSON.
    ``headers`` (a mapping or ``((name, value), ...)``) are added to the answer."""
    if isinstance(body, str):
        resp = web.Response(status=status, text=body, content_type="text/plain")
    else:
        resp = web.json_response(body, status=status)
    for name, value in headers.items() if hasattr(headers, "items") else headers:
        resp.headers[name] = value
    return await send(request, record, resp)


async def apply_plain_fault(
    request: web.Request, record: RecordedRequest, fault: Fault, body: bytes, content_type: str
) -> web.StreamResponse:
    """Apply ``fault`` to a non-streaming answer whose intended body is ``body``.

    status: that status and body; stall: nothing until cancelled; malformed: 200 with
    ``{not json``; cut: headers announcing ``len(body)``, half the body, then close.
    """
    record.fault = fault.kind
    if fault.kind == "status":
        return await send_status(request, record, fault.status_code or 500, fault.body, fault.headers)
    if fault.kind == "stall":
        await asyncio.get_running_loop().create_future()  # never resolves; only cancelled
    if fault.kind == "malformed":
        return await send(request, record, web.Response(status=200, body=b"{not json", content_type=content_type))
    resp = web.StreamResponse(status=200, headers={TRACE_HEADER: record.trace_id})
    resp.content_type = content_type
    resp.content_length = len(body)
    record.status = 200
    await resp.prepare(request)
    await resp.write(body[: len(body) // 2])
    close_transport(request)
    return resp


async def respond_whole(
    request: web.Request,
    record: RecordedRequest,
    shape: Shape,
    plan: OutputPlan,
    prompt_tokens: int,
    fault: Fault | None,
    latency: LatencyModel,
) -> web.StreamResponse:
    """Answer a non-streaming request after TTFT plus the decoding time of ``plan``."""
    delay = latency.sample_ttft_s() + max(0, len(plan.pieces) - 1) * latency.token_interval_s()
    await asyncio.sleep(delay)
    return await send_whole(request, record, shape, plan, prompt_tokens, fault)


async def send_whole(
    request: web.Request,
    record: RecordedRequest,
    shape: Shape,
    plan: OutputPlan,
    prompt_tokens: int,
    fault: Fault | None,
) -> web.StreamResponse:
    """Send the whole answer of ``plan`` at once (the wait is the caller's), or the plain
    ``fault``; records what went out."""
    use = usage(prompt_tokens, len(plan.pieces))
    body = json.dumps(shape.full(plan.text, plan.finish_reason, use), ensure_ascii=False).encode()
    if fault is not None:
        return await apply_plain_fault(request, record, fault, body, "application/json")
    resp = web.Response(body=body, content_type="application/json")
    record.first_token_at = time.monotonic()
    await send(request, record, resp)
    record.tokens_sent = len(plan.pieces)
    record.text_sent = plan.text
    record.finish_reason = plan.finish_reason
    record.completed = True
    return resp


class Framing:
    """How one streaming endpoint frames its answer on the wire.

    The default is OpenAI's SSE framing around a :class:`Shape`; the local-engine
    endpoints (llama-server ``/infill``, Ollama ``/api/generate``) bring their own (see
    :mod:`devtools.simulator.engines`).

    Attributes:
        content_type, charset: of the response (``charset=None``: none sent).
        malformed: bytes written by a ``malformed`` fault (one unparseable event/line).
        keepalive: bytes written every ``keepalive_s`` seconds by a ``stall`` fault that
            asks for keep-alives; ``None``: the format has none, so nothing is written.
    """

    content_type = "text/event-stream"
    charset: str | None = "utf-8"
    malformed = SSE_MALFORMED
    keepalive: bytes | None = SSE_KEEPALIVE

    def __init__(self, shape: Shape | None = None, prompt_tokens: int = 0) -> None:
        self.shape = shape
        self.prompt_tokens = prompt_tokens

    def opening(self) -> list[bytes]:
        """Written right after the headers, before the time to first token."""
        return [SSE_KEEPALIVE]

    def before_tokens(self) -> list[bytes]:
        """Written after the time to first token, before the first token."""
        assert self.shape is not None
        return [sse_event(self.shape.empty_chunk())] + [sse_event(c) for c in self.shape.preamble()]

    def token(self, piece: str, index: int) -> bytes:
        """One token event carrying ``piece`` (token number ``index``, from 0)."""
        assert self.shape is not None
        return sse_event(self.shape.token_chunk(piece))

    def closing(self, plan: OutputPlan) -> list[bytes]:
        """Written after the last token: the final event(s) of a complete answer."""
        assert self.shape is not None
        use = usage(self.prompt_tokens, len(plan.pieces))
        return [sse_event(self.shape.final_chunk(plan.finish_reason, use)), SSE_DONE]


async def stream(
    request: web.Request,
    record: RecordedRequest,
    shape: Shape,
    plan: OutputPlan,
    prompt_tokens: int,
    fault: Fault | None,
    latency: LatencyModel,
    on_token: Callable[[], None],
) -> web.StreamResponse:
    """Stream ``plan`` as OpenAI-style SSE; ``on_token()`` is called after each token event.

    Sequence: headers, ``: keep-alive`` comment, (TTFT), a chunk with empty
    ``choices``, the shape's preamble (chat: role delta), one event per piece, token
    ``i`` at ``first_token + i / tokens_per_s``, the final chunk with ``finish_reason``
    and ``usage``, ``data: [DONE]``. A fault acts just before token
    ``fault.after_tokens`` (or before the final chunk if the answer has fewer tokens).
    """
    return await stream_frames(request, record, Framing(shape, prompt_tokens), plan, fault, latency, on_token)


async def stream_frames(
    request: web.Request,
    record: RecordedRequest,
    framing: Framing,
    plan: OutputPlan,
    fault: Fault | None,
    latency: LatencyModel,
    on_token: Callable[[], None],
    extra_delay_s: float = 0.0,
) -> web.StreamResponse:
    """Stream ``plan`` in ``framing``'s wire format, paced by ``latency``.

    Sequence: headers, ``framing.opening()``, (``extra_delay_s`` + TTFT seconds),
    ``framing.before_tokens()``, one ``framing.token()`` per piece (token ``i`` at
    ``first_token + i / tokens_per_s``), ``framing.closing()``. A fault acts just before
    token ``fault.after_tokens`` (or before the closing frames if the answer has fewer
    tokens). ``record.completed`` is set once the closing frames are written.
    """
    resp = await open_stream(request, record, framing)
    await asyncio.sleep(extra_delay_s + latency.sample_ttft_s())
    for frame in framing.before_tokens():
        await resp.write(frame)

    loop = asyncio.get_running_loop()
    interval = latency.token_interval_s()
    first_at = 0.0
    pending = fault
    for i, piece in enumerate(plan.pieces):
        if i > 0:
            delay = first_at + i * interval - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
        if pending is not None and pending.after_tokens == i:
            fault_now, pending = pending, None
            if await stream_fault(request, resp, record, fault_now, framing):
                return resp
        await write_token(resp, record, framing, piece, i)
        if i == 0:
            first_at = loop.time()
        on_token()
    if pending is not None and await stream_fault(request, resp, record, pending, framing):
        return resp
    return await close_stream(resp, record, framing, plan)


async def open_stream(request: web.Request, record: RecordedRequest, framing: Framing) -> web.StreamResponse:
    """Send the headers (status 200, the trace header) and ``framing.opening()``."""
    resp = web.StreamResponse(status=200, headers={TRACE_HEADER: record.trace_id, "Cache-Control": "no-cache"})
    resp.content_type = framing.content_type
    if framing.charset:
        resp.charset = framing.charset
    record.status = 200
    await resp.prepare(request)
    for frame in framing.opening():
        await resp.write(frame)
    return resp


async def write_token(resp: web.StreamResponse, record: RecordedRequest, framing: Framing, piece: str, i: int) -> None:
    """Write token ``i`` (``piece``) and record it (the first one's time too)."""
    await resp.write(framing.token(piece, i))
    if i == 0:
        record.first_token_at = time.monotonic()
    record.tokens_sent += 1
    record.text_sent += piece


async def close_stream(
    resp: web.StreamResponse, record: RecordedRequest, framing: Framing, plan: OutputPlan
) -> web.StreamResponse:
    """Write ``framing.closing()`` and mark the request completed."""
    for frame in framing.closing(plan):
        await resp.write(frame)
    record.finish_reason = plan.finish_reason
    record.completed = True
    return resp


async def stream_fault(
    request: web.Request,
    resp: web.StreamResponse,
    record: RecordedRequest,
    fault: Fault,
    framing: Framing | None = None,
) -> bool:
    """Apply a stream fault in ``framing``'s wire format (default: SSE). Returns True if
    the stream is over (cut)."""
    framing = framing or Framing()
    record.fault = fault.kind
    logger.debug("request #%d: %s fault after %d tokens", record.index, fault.kind, record.tokens_sent)
    if fault.kind == "malformed":
        await resp.write(framing.malformed)
        return False
    if fault.kind == "cut":
        close_transport(request)
        return True
    # stall: hold the connection open until the client leaves (or stop()).
    keepalive_s = fault.keepalive_s
    keepalive = framing.keepalive
    while keepalive_s is None or keepalive is None:
        await asyncio.get_running_loop().create_future()  # never resolves; only cancelled
    while True:
        await asyncio.sleep(keepalive_s)
        await resp.write(keepalive)


class WholeAnswer:
    """A stand-in for :class:`Shape` in ``respond_whole``: the body is already built."""

    def __init__(self, body: dict) -> None:
        self.body = body

    def full(self, text: str, finish_reason: str, use: dict[str, int]) -> dict:
        return self.body
