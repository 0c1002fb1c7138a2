"""The stream runner (completion/stream.py) in process, with a fake backend and its real
collaborators (settings, metrics, reports, the window budget): a stream that succeeds,
one that stalls past the deadline, one that fails, one cancelled mid-way, and a model
that refuses native FIM. Over real HTTP and stdio: tests/e2e/."""

from __future__ import annotations

import asyncio
import time

import pytest

from sidecar.backends.errors import FIM_UNSUPPORTED, RATE_LIMITED, BackendError
from sidecar.completion.context import build_context
from sidecar.completion.context_budget import ContextBudget
from sidecar.completion.postprocess import StreamFilter
from sidecar.completion.reports import Reports
from sidecar.completion.stream import StreamDeps, StreamRunner
from sidecar.config import Settings
from sidecar.metrics import Metrics

pytestmark = pytest.mark.timeout(20)

DOC = "def add(a, b):\n    return "
CTX = build_context(DOC + "\n", len(DOC), "python", 1024, 256)


class FakeBackend:
    """A cloud backend that plays ``script``: ``("text", str)`` yields a delta,
    ``("sleep", s)`` waits, ``("raise", BackendError)`` fails; one script per request
    (the last one repeats)."""

    api = "siliconflow"
    provider = "siliconflow"
    name = "fake cloud"
    model = "Qwen/Qwen2.5-Coder-7B-Instruct"
    engine = None
    base_url = "https://fake.invalid/v1"
    loads_models = False
    headers_before_prompt = True
    cooldown = None

    def __init__(self, *scripts: list[tuple[str, object]]) -> None:
        self.scripts = list(scripts)
        self.requests: list = []
        self.closed = 0

    async def ensure_ready(self) -> None:
        return None

    async def stream(self, req, info):
        script = self.scripts[min(len(self.requests), len(self.scripts) - 1)]
        self.requests.append(req)
        info.sent_at = time.perf_counter()
        try:
            for op, arg in script:
                if op == "sleep":
                    await asyncio.sleep(arg)
                elif op == "raise":
                    raise arg
                else:
                    info.events += 1
                    info.first_token_at = info.first_token_at or time.perf_counter()
                    yield arg
            info.ended_at = time.perf_counter()
        except (asyncio.CancelledError, GeneratorExit):
            self.closed += 1
            raise


def make(backend: FakeBackend, **settings):
    st = Settings(api_key="sk-test-stream-runner-0123456789", **settings)
    metrics = Metrics()
    errors: list[BackendError] = []
    recorded: list = []
    spares: list[int] = []
    reports = Reports(metrics, on_error=errors.append, on_log=lambda m: None, on_slow=lambda: None, warn_ms=lambda: 1e9)
    deps = StreamDeps(
        settings=lambda: st,
        target=lambda: backend,
        record=lambda t, e: recorded.append(e),
        metrics=metrics,
        reports=reports,
        context_budget=ContextBudget(lambda: st, lambda: backend, metrics),
        spare_connection=lambda: spares.append(1),
    )
    return StreamRunner(deps), metrics, errors, recorded, spares


async def test_a_stream_that_succeeds_is_filtered_measured_and_makes_the_backend_warm():
    backend = FakeBackend([("text", "a + b"), ("text", "\n\ndef sub(a, b):\n")])
    runner, metrics, errors, recorded, _ = make(backend)
    assert runner.cold(backend)
    filt = StreamFilter(CTX)
    out = await runner.run(CTX, filt)
    assert out.error is None and not out.deadline_hit
    assert filt.text() == "a + b"
    assert out.strategy == "suffix" and backend.requests[0].body["suffix"] == CTX.suffix
    assert metrics.counters["upstream.requests"] == 1 and metrics.recent("upstream_ttft")
    assert recorded == [None] and errors == []
    assert not runner.cold(backend)


async def test_a_stream_that_stalls_ends_at_the_request_deadline():
    backend = FakeBackend([("sleep", 5.0), ("text", "never")])
    runner, metrics, errors, _, _ = make(backend, request_timeout_ms=100)
    t = time.perf_counter()
    out = await runner.run(CTX, StreamFilter(CTX))
    took = time.perf_counter() - t
    assert out.deadline_hit and out.error is None
    assert metrics.counters["upstream.deadline"] == 1
    assert took < 2.0, took
    assert backend.closed == 1  # the upstream stream was closed, not left running


async def test_an_error_is_reported_once_and_recorded():
    err = BackendError(RATE_LIMITED, "rate limited: 60 requests per minute", status=429)
    backend = FakeBackend([("raise", err)])
    runner, metrics, errors, recorded, _ = make(backend)
    out = await runner.run(CTX, StreamFilter(CTX))
    assert out.error is not None and out.error.kind == RATE_LIMITED
    assert [e.kind for e in errors] == [RATE_LIMITED] and recorded[-1].kind == RATE_LIMITED
    assert runner.cold(backend)  # nothing came from it


async def test_a_cancelled_stream_closes_upstream_counts_its_prompt_and_opens_a_spare_connection():
    backend = FakeBackend([("text", "a"), ("sleep", 5.0), ("text", " + b")])
    runner, metrics, _, _, spares = make(backend)
    filt = StreamFilter(CTX)
    task = asyncio.ensure_future(runner.run(CTX, filt))
    while not filt.raw:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.closed == 1 and spares == [1]
    assert metrics.counters["upstream.cancelled"] == 1
    assert metrics.snapshot()["sizes"]["prompt.new_tokens"]["count"] == 1


async def test_a_model_that_refuses_native_fim_falls_back_once_and_is_remembered():
    refused = BackendError(FIM_UNSUPPORTED, "the model does not take suffix", status=400)
    backend = FakeBackend([("raise", refused)], [("text", "a + b\n")])
    runner, metrics, errors, _, _ = make(backend)
    out = await runner.run(CTX, StreamFilter(CTX))
    assert out.error is None and [r.strategy for r in backend.requests] == ["suffix", "template"]
    assert errors == []
    await runner.run(CTX, StreamFilter(CTX))
    assert backend.requests[-1].strategy == "template"  # not asked with suffix again
    runner.reset()  # new settings: the refusal is forgotten
    await runner.run(CTX, StreamFilter(CTX))
    assert backend.requests[-1].strategy == "suffix"
