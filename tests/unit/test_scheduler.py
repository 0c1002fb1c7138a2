"""The keystroke scheduler on its own: a fake upstream (a coroutine that feeds text into
the stream filter when the test says so), real event loop, no subprocess, no backend.

Each test drives ``Scheduler.request`` the way the LSP surface does and checks what is
answered and how many upstream streams were started or closed."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from sidecar.completion import scheduler
from sidecar.completion.context import build_context
from sidecar.completion.debounce import Cadence, ceiling_ms, context_factor, debounce_ms
from sidecar.completion.inflight import StreamEnd
from sidecar.completion.prefetch import TokenBudget
from sidecar.completion.request import Request
from sidecar.completion.scheduler import Scheduler
from sidecar.config import Settings
from sidecar.metrics import Metrics

pytestmark = pytest.mark.timeout(20)


class FakeUpstream:
    """Streams started by the scheduler. Each waits for ``release(i, text, end)``; a
    cancelled one is recorded as closed."""

    def __init__(self) -> None:
        self.started: list[str] = []  # the prefix of each stream's context
        self.closed: list[int] = []
        self._feeds: list[asyncio.Queue] = []

    async def run_stream(self, ctx, filt, on_delta, waking=False) -> StreamEnd:
        i = len(self.started)
        self.started.append(ctx.prefix)
        q: asyncio.Queue = asyncio.Queue()
        self._feeds.append(q)
        try:
            while True:
                text, end = await q.get()
                if text:
                    filt.feed(text)
                    on_delta()
                if end:
                    return StreamEnd.COMPLETE
        except asyncio.CancelledError:
            self.closed.append(i)
            raise

    async def release(self, i: int, text: str, end: bool = False) -> None:
        while len(self._feeds) <= i:
            await asyncio.sleep(0.001)
        self._feeds[i].put_nowait((text, end))
        await asyncio.sleep(0.01)


class FakeService:
    """The scheduler's ``Upstream``: live settings, the fake streams, an idle backend."""

    def __init__(self, settings: Settings, up: FakeUpstream) -> None:
        self.settings = settings
        self.run_stream = up.run_stream
        self.local = True  # a local engine (its silence before the first text is prefill)

    def recent_ttft_ms(self):
        return None

    def make_context(self, doc_prefix, doc_suffix, language):
        return build_context(doc_prefix + doc_suffix, len(doc_prefix), language, 1024, 256)

    def cache_key(self, ctx):
        return (ctx.prefix, ctx.suffix)

    def local_backend(self):
        return self.local

    def backend_silent(self):
        return self.backend_cold()

    def backend_cold(self):
        return False

    def backend_limited(self):
        return False

    def backend_busy(self):
        return False


def make(settings: Settings | None = None):
    up = FakeUpstream()
    st = settings or Settings(debounce_min_ms=0, debounce_max_ms=0, prefetch_enabled=False)
    updates: list[tuple[int, str, bool]] = []
    sched = Scheduler(
        FakeService(st, up),
        metrics=Metrics(),
        on_update=lambda req, text, done, seq: updates.append((req.id, text, done)),
    )
    return sched, up, updates


def request(text: str, cursor: int, uri: str = "file:///a.py") -> Request:
    ctx = build_context(text, cursor, "python", 1024, 256)
    return Request(uri=uri, version=1, ctx=ctx, doc_prefix=text[:cursor], doc_suffix=text[cursor:], invoked=False)


DOC = "def f(x):\n    return \n"
AT = DOC.index("return ") + len("return ")


def typed(n_chars: str) -> tuple[str, int]:
    """DOC with ``n_chars`` typed at the cursor, and the new cursor."""
    return DOC[:AT] + n_chars + DOC[AT:], AT + len(n_chars)


async def test_answer_at_first_complete_line_then_updates_to_the_end():
    sched, up, updates = make()
    task = asyncio.ensure_future(sched.request(request(DOC, AT)))
    await up.release(0, "x + 1")
    assert not task.done()  # the first line is not complete yet
    await up.release(0, "\n    y = 2", end=True)
    ans = await task
    assert ans is not None and ans.text == "x + 1" and ans.source == "stream"
    assert len(up.started) == 1


async def test_typing_what_the_stream_produces_joins_it():
    sched, up, _ = make()
    first = asyncio.ensure_future(sched.request(request(DOC, AT)))
    await up.release(0, "va")
    text, cur = typed("v")
    second = asyncio.ensure_future(sched.request(request(text, cur)))
    await up.release(0, "lue + 1", end=True)
    sup = await first  # superseded: answered at once with what it had, no updates
    assert sup is None or sup.source == "superseded"
    ans = await second
    assert ans.text == "alue + 1" and ans.source == "joined"
    assert len(up.started) == 1 and up.closed == []


async def test_typing_through_a_finished_suggestion_needs_no_stream():
    sched, up, _ = make()
    t = asyncio.ensure_future(sched.request(request(DOC, AT)))
    await up.release(0, "value + 1", end=True)
    assert (await t).text == "value + 1"
    text, cur = typed("val")
    ans = await sched.request(request(text, cur))
    assert ans.text == "ue + 1" and ans.source == "typed_through"
    assert len(up.started) == 1


async def test_divergence_closes_the_stream_and_starts_another():
    sched, up, _ = make()
    first = asyncio.ensure_future(sched.request(request(DOC, AT)))
    await up.release(0, "value")
    text, cur = typed("z")
    second = asyncio.ensure_future(sched.request(request(text, cur)))
    await asyncio.sleep(0.02)
    assert up.closed == [0]  # closed at once, so its socket closes
    assert len(up.started) == 2 and up.started[1].endswith("return z")
    await up.release(1, " = 3\n", end=True)
    sup = await first
    assert sup is None or sup.source == "superseded"
    assert (await second).text == " = 3"


async def test_request_deadline_answers_null_and_frees_the_stalled_stream():
    st = Settings(debounce_min_ms=0, debounce_max_ms=0, prefetch_enabled=False, request_timeout_ms=200)
    sched, up, _ = make(st)
    sched.upstream.local = False  # a cloud: silence is a stall
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    ans = await sched.request(request(DOC, AT))  # the fake upstream never sends anything
    assert ans is None
    assert 0.15 < loop.time() - t0 < 1.0
    await asyncio.sleep(0.01)
    assert up.closed == [0] and sched.active_streams() == 0


async def test_local_stream_still_evaluating_its_prompt_outlives_the_deadline():
    # A local engine's silence is prompt evaluation: the request is answered null on time,
    # the stream runs on, and its text reaches that request as updates.
    st = Settings(debounce_min_ms=0, debounce_max_ms=0, prefetch_enabled=False, request_timeout_ms=100)
    sched, up, updates = make(st)
    req = request(DOC, AT)
    req.updates = True
    assert await sched.request(req) is None
    await asyncio.sleep(0.05)
    assert up.closed == [] and sched.active_streams() == 1
    await up.release(0, "x + 1", end=True)
    await asyncio.sleep(0.01)
    assert updates and updates[-1] == (req.id, "x + 1", True), updates
    assert len(up.started) == 1


async def test_kept_prefill_is_closed_once_the_user_moves_elsewhere():
    st = Settings(debounce_min_ms=0, debounce_max_ms=0, prefetch_enabled=False, request_timeout_ms=100)
    sched, up, _ = make(st)
    assert await sched.request(request(DOC, AT)) is None  # kept past its deadline
    await asyncio.sleep(0.01)
    assert up.closed == []
    moved = DOC.index("(x)")  # a place the kept stream's prompt does not extend
    asyncio.ensure_future(sched.request(request(DOC, moved)))
    await asyncio.sleep(0.05)
    assert up.closed == [0] and len(up.started) == 2


async def test_cancelled_request_closes_its_stream_after_the_grace_period():
    sched, up, _ = make()
    t = asyncio.ensure_future(sched.request(request(DOC, AT)))
    await up.release(0, "va")
    t.cancel()
    with pytest.raises(asyncio.CancelledError):
        await t
    await asyncio.sleep(0.06)  # CANCEL_GRACE_S is 25 ms
    assert up.closed == [0] and sched.active_streams() == 0


async def test_stream_closed_in_the_turn_it_starts_leaves_nothing_running():
    # Regression (cancel storm): a stream closed before its task's first step ran used to
    # stay "active" forever. Request a (invoked: no debounce) starts its stream; request b
    # (a backspace) arrives in the same loop turn, closes that stream before its fill
    # ever ran, waits its debounce and is cancelled there, so no stream replaces a's.
    st = Settings(debounce_min_ms=50, debounce_max_ms=50, prefetch_enabled=False)
    sched, up, _ = make(st)
    ra = request(DOC, AT)
    ra.invoked = True
    a = asyncio.ensure_future(sched.request(ra))
    b = asyncio.ensure_future(sched.request(request(DOC[: AT - 1] + DOC[AT:], AT - 1)))
    await asyncio.sleep(0.01)
    b.cancel()
    assert await a is None
    with pytest.raises(asyncio.CancelledError):
        await b
    await asyncio.sleep(0.05)
    assert up.started == []  # a's fill never ran
    assert sched.active_streams() == 0


async def test_updates_grow_then_end_with_done():
    sched, up, updates = make()
    t = asyncio.ensure_future(sched.request(request("def f(x):\n    ", len("def f(x):\n    "))))
    await up.release(0, "a = 1\n")
    ans = await t
    assert ans.text.startswith("a = 1")
    await up.release(0, "    b = 2\n", end=True)
    await asyncio.sleep(0.02)
    assert updates and updates[-1][2] is True and "b = 2" in updates[-1][1]


# ---------------------------------------------------------------- debounce and budget
@pytest.mark.parametrize(
    "line_prefix, factor", [("", 0.6), ("    ", 0.6), ("x = ", 0.6), ("f(", 0.6), ("retur", 1.4), ("x)", 1.0)]
)
def test_context_factor(line_prefix, factor):
    assert context_factor(line_prefix, "") == factor


@pytest.mark.parametrize(
    "kw, expected",
    [
        (dict(invoked=True, cadence_ms=150, ttft_ms=None), 0.0),  # the user asked: no wait
        (dict(invoked=False, cadence_ms=100, ttft_ms=None), 150.0 * 1.4),  # 1.5 x cadence x word factor
        (dict(invoked=False, cadence_ms=100, ttft_ms=2000), 400.0),  # TTFT term, clamped at the ceiling
        (dict(invoked=False, cadence_ms=10, ttft_ms=None), 50.0),  # clamped at the floor
    ],
)
def test_debounce_ms(kw, expected):
    got = debounce_ms(line_prefix="retur", line_suffix="", floor_ms=50, ceiling_ms=400, **kw)
    assert got == pytest.approx(expected)


def test_debounce_ceiling_defaults_by_backend():
    assert ceiling_ms(None, local=True) == 100 and ceiling_ms(None, local=False) == 400
    assert ceiling_ms(250, local=True) == 250 and ceiling_ms(0, local=False) == 0


@pytest.mark.parametrize("local, setting, expected", [(True, None, 100), (False, None, 400), (True, 300, 300)])
async def test_the_scheduler_waits_the_backends_debounce_ceiling(local, setting, expected, monkeypatch):
    # A slow typist (1 s between keys, a word in progress): the cadence asks for 2.1 s,
    # so the wait is the ceiling: 100 ms on a local engine, 400 ms on a cloud, unless set.
    # The wait is recorded, not slept (a real one: the cancel-storm test above).
    waits: list[float] = []

    async def wait(req, timeout_s):
        waits.append(timeout_s)
        return False

    monkeypatch.setattr(scheduler, "superseded_within", wait)
    st = Settings(debounce_min_ms=0, debounce_max_ms=setting, prefetch_enabled=False)
    sched, up, _ = make(st)
    sched.upstream.local = local
    text = DOC[:AT] + "va" + DOC[AT:]
    req = request(text, AT + 2)
    for t in (0.0, 1000.0, 2000.0):
        sched.docs.get(req.uri).cadence.keystroke(t)
    task = asyncio.ensure_future(sched.request(req))
    await up.release(0, "lue\n", end=True)
    await task
    assert sched.metrics.recent("debounce") == [pytest.approx(expected)]
    assert waits == [pytest.approx(expected / 1000)]


def test_cadence_ignores_pauses():
    c = Cadence()
    for t in (0, 100, 200, 300, 5000, 5100):
        c.keystroke(t)
    assert c.interval_ms() == 100


def test_token_budget_rolls_over_a_minute(monkeypatch):
    import sidecar.completion.prefetch as prefetch

    now = [1000.0]
    monkeypatch.setattr(prefetch.time, "monotonic", lambda: now[0])
    b = TokenBudget(100)
    assert b.try_reserve(60) and not b.try_reserve(50) and b.try_reserve(40)
    now[0] += 61
    assert b.used() == 0 and b.try_reserve(100)


def test_a_settled_reservation_gives_back_what_it_did_not_use(monkeypatch):
    import sidecar.completion.prefetch as prefetch

    monkeypatch.setattr(prefetch.time, "monotonic", lambda: 1000.0)
    b = TokenBudget(100)
    r = b.try_reserve(90)
    assert r is not None and b.try_reserve(20) is None
    TokenBudget.settle(r, 30)  # its prompt and what it generated
    assert b.used() == 30 and b.try_reserve(70) is not None and b.try_reserve(1) is None
    TokenBudget.settle(r, 500)  # never more than was reserved
    assert b.used() == 100


def test_request_dataclass_defaults_are_per_instance():
    r1, r2 = request(DOC, AT), request(DOC, AT)
    assert r1.superseded is not r2.superseded
    assert dataclasses.fields(r1)
