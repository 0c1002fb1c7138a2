"""Rate limits and overload (issue 15): Retry-After is honoured, nothing goes upstream
inside the window, prefetch pauses, one message per episode, recovery at once after it.
Units of the parser and the cool-down state machine (injected clock); the simulator and
the real sidecar over stdio are tests/e2e/test_rate_limits_e2e.py."""

from __future__ import annotations

import datetime as dt

import httpx2 as httpx
import pytest

from sidecar.backends.errors import OVERLOADED, RATE_LIMITED, classify
from sidecar.backends.ratelimit import CoolDown, parse_retry_after, retry_after_s

pytestmark = pytest.mark.timeout(90)


def test_retry_after_delay_seconds_and_http_date():
    assert parse_retry_after("12") == 12.0
    assert parse_retry_after(" 0 ") == 0.0
    assert parse_retry_after("1.5") == 1.5
    now = dt.datetime(2015, 10, 21, 7, 27, 48, tzinfo=dt.UTC).timestamp()
    # RFC 9110 §5.6.7: IMF-fixdate, and the obsolete RFC 850 and asctime forms.
    for date in ("Wed, 21 Oct 2015 07:28:00 GMT", "Wednesday, 21-Oct-15 07:28:00 GMT", "Wed Oct 21 07:28:00 2015"):
        assert parse_retry_after(date, now_wall=lambda: now) == pytest.approx(12.0), date
    assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now_wall=lambda: now) == 0.0  # in the past
    for junk in (None, "", "soon", "-3", "12 s"):
        assert parse_retry_after(junk) is None, junk


def test_retry_after_from_headers_and_bodies():
    assert retry_after_s(httpx.Headers({"Retry-After": "12"})) == 12.0
    assert retry_after_s(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert retry_after_s({}, "Rate limit reached. Please try again in 20s.") == 20.0
    assert retry_after_s({}, "please retry after 250 ms") == 0.25
    assert retry_after_s({}, "TPM limit reached") is None
    # The header wins over the body.
    assert retry_after_s(httpx.Headers({"Retry-After": "3"}), "try again in 20s") == 3.0


def test_classify_carries_retry_after():
    body = b'{"code": 50603, "message": "Request was rejected due to rate limiting. Details: TPM limit reached.", "data": null}'
    err = classify(429, body, backend="SiliconFlow", model="m", headers=httpx.Headers({"Retry-After": "12"}))
    assert err.kind == RATE_LIMITED and err.retry_after_s == 12.0 and "TPM limit" in err.message
    assert "12 s" in err.message
    assert classify(429, body, backend="b", model="m").retry_after_s is None
    over = classify(
        503,
        b'{"code": 50505, "message": "Model service overloaded.", "data": null}',
        backend="b",
        model="m",
        headers={"retry-after": "4"},
    )
    assert over.kind == OVERLOADED and over.retry_after_s == 4.0
    assert classify(400, b"{}", backend="b", model="m", headers={"retry-after": "4"}).retry_after_s is None


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_cooldown_exponential_backoff_with_jitter_and_reset():
    clock = Clock()
    cd = CoolDown(clock=clock, rand=lambda: 0.5)  # 0.5: no jitter
    assert cd.admit() and not cd.in_episode
    waits = []
    for _ in range(9):
        cd.failure(None)
        waits.append(cd.remaining_s())
        clock.t += cd.remaining_s()
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert cd.admit()  # the window is over: the next request goes out at once
    cd.success()
    assert not cd.in_episode and cd.failures == 0
    cd.failure(None)
    assert cd.remaining_s() == 1.0  # back to 1 s after a success
    # Jitter: +-20 %.
    low, high = CoolDown(clock=clock, rand=lambda: 0.0), CoolDown(clock=clock, rand=lambda: 0.999999)
    low.failure(None)
    high.failure(None)
    assert low.remaining_s() == pytest.approx(0.8) and high.remaining_s() == pytest.approx(1.2, abs=1e-4)


def test_cooldown_honours_retry_after_and_admits_nothing_inside_it():
    clock = Clock()
    cd = CoolDown(clock=clock)
    assert cd.failure(12.0) is True  # starts an episode: the one to report
    admitted = 0
    for _ in range(23):  # one request per keystroke, every 0.5 s (the measurement in the issue)
        admitted += cd.admit()
        clock.t += 0.5
    assert admitted == 0
    assert cd.failure(12.0) is False  # the same episode
    clock.t += 12.0
    assert cd.admit() and cd.admit()  # after the window: at once, and not only once
    # A success of a request sent before a window does not end a running window.
    cd.failure(5.0)
    cd.success()
    assert cd.limited and cd.in_episode
    clock.t += 5.0
    cd.success()
    assert not cd.limited and not cd.in_episode


def test_cooldown_long_window_lets_one_probe_through():
    clock = Clock()
    cd = CoolDown(clock=clock)
    cd.failure(600.0)
    sent = []
    for i in range(240):  # 4 minutes of keystrokes, one a second
        if cd.admit():
            sent.append(i)
        clock.t += 1.0
    assert sent == [60]  # one probe once the window is 60 s old
    cd.success()  # the probe came back fine: the episode ends at once
    assert cd.admit() and not cd.in_episode
