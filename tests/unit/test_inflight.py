"""InflightStream lifecycle on a real event loop (no backend: the fill is a coroutine)."""

from __future__ import annotations

import asyncio

from sidecar.completion.context import CompletionContext
from sidecar.completion.inflight import InflightStream, StreamEnd, StreamState


def _stream() -> InflightStream:
    ctx = CompletionContext(prefix="x = ", suffix="", line_prefix="x = ", line_suffix="", language="python", eol="\n")
    return InflightStream("file:///a.py", ctx, "x = ", "")


async def test_stream_closed_before_its_first_step_still_ends():
    # The cancel-storm leak: a stream closed in the same loop turn it was started in
    # never ran its body, so it stayed "running" forever and its end hook never ran.
    ended = []
    started = []

    async def fill(filt, on_delta):
        started.append(True)
        await asyncio.sleep(10)
        return StreamEnd.COMPLETE

    s = _stream()
    s.run(fill, ended.append)
    assert s.close()
    waiter = s.changed()
    await asyncio.wait_for(waiter, 1)
    assert not started
    assert s.done and s.state is StreamState.DONE and s.end is StreamEnd.ABORTED and s.aborted
    assert ended == [s]


async def test_stream_end_hook_runs_once():
    ended = []

    async def fill(filt, on_delta):
        return StreamEnd.COMPLETE

    s = _stream()
    s.run(fill, ended.append)
    await s.task
    await asyncio.sleep(0)
    assert s.done and s.end is StreamEnd.COMPLETE
    assert ended == [s]


# ---------------------------------------------------------------- lookahead (postprocess/pipeline.py)
PRE = "def scale(a, b):\n    x = "


def _ctx(prefix: str, line_prefix: str) -> CompletionContext:
    return CompletionContext(
        prefix=prefix, suffix="\n", line_prefix=line_prefix, line_suffix="", language="python", eol="\n"
    )


def _fed(deltas, lookahead=1, prefix=PRE, line_prefix="    x = ") -> tuple[InflightStream, list[tuple[bool, bool]]]:
    s = InflightStream("file:///a.py", _ctx(prefix, line_prefix), prefix, "\n", None, lookahead)
    return s, [(s.filter.feed(d), s.filter.done) for d in deltas]


def test_a_one_line_answer_ends_at_its_line_and_reads_one_more_line():
    s, steps = _fed(["a + b\n", "    y = x", " * 2\n", "    return y\n"])
    # Answered at the end of its line (done), the stream stops after the next line.
    assert steps == [(False, True), (False, True), (True, True), (True, True)]
    assert s.text == "a + b\n" and s.reach == "a + b\n    y = x * 2\n"
    assert s.remainder("", s.ctx) == "a + b"  # what is shown is unchanged


def test_after_the_accept_the_next_line_comes_from_the_lookahead():
    s, _ = _fed(["a + b\n    y = x * 2\n"])
    at_line_end = _ctx(PRE + "a + b", "    x = a + b")
    assert s.agrees("a + b") and s.remainder("a + b", at_line_end) == "\n    y = x * 2"
    after_enter = _ctx(PRE + "a + b\n    ", "    ")
    assert s.remainder("a + b\n    ", after_enter) == "y = x * 2"
    assert not s.agrees("a + c")
    assert s.covers(PRE + "a + b", "\n") and not s.covers(PRE + "a - b", "\n")


def test_without_lookahead_the_stream_stops_at_the_answers_end():
    s, steps = _fed(["a + b\n", "    y = x * 2\n"], lookahead=0)
    assert steps[0] == (True, True)
    assert s.reach == s.text == "a + b\n"
    assert s.remainder("a + b", _ctx(PRE + "a + b", "    x = a + b")) == ""


def test_blank_lines_only_give_up_the_lookahead():
    s, steps = _fed(["a + b\n", "\n", "\n", "\n", "    y = 1\n"])
    assert [stop for stop, _done in steps] == [False, False, False, True, True]
    assert s.reach == s.text


def test_a_multi_line_context_reads_no_lookahead():
    prefix = "def scale(a, b):\n    "
    s, steps = _fed(["x = a\n", "    return x\n", "\n", "def other():\n"], prefix=prefix, line_prefix="    ")
    assert steps[-1][0] and s.reach == s.text


async def test_a_fill_that_raises_ends_the_stream_as_failed():
    # A fault the backend did not classify (not a BackendError) ends this stream only:
    # its waiters wake, nothing is left as an unretrieved task exception.
    ended = []

    async def fill(filt, on_delta):
        raise UnicodeEncodeError("utf-8", "\ud83d", 0, 1, "surrogates not allowed")

    s = _stream()
    s.run(fill, ended.append)
    await asyncio.wait_for(s.changed(), 1)
    await asyncio.sleep(0)
    assert s.done and s.failed and s.end is StreamEnd.ERROR and ended == [s]
    assert s.task.done() and s.task.exception() is None


def test_a_lookahead_line_still_being_written_is_no_finished_line():
    # A client without updates is answered with finished lines only: after the accept,
    # the lookahead line counts only once it is complete (never "\n    return").
    s, steps = _fed(["a + b\n", "    return"])
    at_line_end = _ctx(PRE + "a + b", "    x = a + b")
    assert steps[-1] == (False, True)  # answered, still reading the lookahead
    assert s.remainder("a + b", at_line_end, finished_lines_only=True) == ""
    assert s.remainder("a + b", at_line_end) == "\n    return"  # what an update client is shown so far
    s.filter.feed(" x\n")
    assert s.remainder("a + b", at_line_end, finished_lines_only=True) == "\n    return x"


async def test_a_lookahead_cut_by_the_token_limit_is_dropped():
    # max_tokens ended the stream in the middle of the lookahead line: that line is not
    # one the model finished, so the request after the accept is not shown it.
    async def fill(filt, on_delta):
        filt.feed("a + b\n")
        filt.feed("    return z +")
        return StreamEnd.PARTIAL  # how the runner ends a stream cut by max_tokens

    s = InflightStream("file:///a.py", _ctx(PRE, "    x = "), PRE, "\n", None, 1)
    s.run(fill)
    await s.task
    at_line_end = _ctx(PRE + "a + b", "    x = a + b")
    assert s.text == "a + b\n" and s.reach == "a + b\n"
    assert s.remainder("a + b", at_line_end) == ""


async def test_a_lookahead_the_model_ended_itself_is_kept():
    async def fill(filt, on_delta):
        filt.feed("a + b\n")
        filt.feed("    return x")  # then the model's end of text
        return StreamEnd.COMPLETE

    s = InflightStream("file:///a.py", _ctx(PRE, "    x = "), PRE, "\n", None, 1)
    s.run(fill)
    await s.task
    assert s.remainder("a + b", _ctx(PRE + "a + b", "    x = a + b")) == "\n    return x"


async def test_a_multi_line_answer_cut_by_the_token_limit_ends_at_its_last_complete_line():
    # max_tokens stopped the model inside the answer's third line: that line is not one
    # the model finished, so the suggestion is the two lines before it.
    blank = CompletionContext(
        prefix="def f(xs):\n    ", suffix="\n", line_prefix="    ", line_suffix="", language="python", eol="\n"
    )

    async def fill(filt, on_delta):
        filt.feed("total = 0\n    for x in xs:\n        total += x *")
        return StreamEnd.PARTIAL

    s = InflightStream("file:///a.py", blank, blank.prefix, "\n", None, 0)
    s.run(fill)
    await s.task
    assert s.ctx.multiline and not s.filter.done
    assert s.remainder("", blank) == "total = 0\n    for x in xs:"


async def test_a_first_line_cut_by_the_token_limit_is_kept():
    async def fill(filt, on_delta):
        filt.feed("a + b +")
        return StreamEnd.PARTIAL

    s = InflightStream("file:///a.py", _ctx(PRE, "    x = "), PRE, "\n", None, 0)
    s.run(fill)
    await s.task
    assert s.remainder("", _ctx(PRE, "    x = ")) == "a + b +"
