"""The repeated receiver at the start of an answer (postprocess/receiver_stutter.py)."""

from __future__ import annotations

import pytest

from sidecar.completion.postprocess.receiver_stutter import ReceiverStutter, receiver_before_cursor


@pytest.mark.parametrize(
    ("line_prefix", "prefix", "suffix", "want"),
    [
        ("        Validate.", "", "", "Validate."),
        ("    x = self.data.", "", "", "data."),  # the last name of a chain
        ("    return immer_.", "", "", "immer_."),
        ("    x = 3.", "", "", ""),  # a number, not a name
        ("    x = a", "", "", ""),  # no dot at the cursor
        ("    x = a. ", "", "", ""),  # a space after the dot
        ("  r.data.", "y = r.data.data.items\n  r.data.", "", ""),  # the doubled form is real here
        ("  r.data.", "", "\nz = r.data.data\n", ""),
    ],
)
def test_receiver_before_cursor(line_prefix, prefix, suffix, want):
    assert receiver_before_cursor(line_prefix, prefix or line_prefix, suffix) == want


def run(receiver: str, deltas: list[str]) -> tuple[str, bool]:
    s = ReceiverStutter(receiver)
    out = "".join(s.feed(d) for d in deltas) + s.flush()
    return out, s.stripped


def test_strips_the_repeated_receiver_in_any_split():
    for deltas in (["Validate.notNull(x);"], ["Vali", "date", ".", "notNull(x);"], ["Validate", ".not", "Null(x);"]):
        assert run("Validate.", deltas) == ("notNull(x);", True)


def test_passes_other_answers_unchanged():
    assert run("Validate.", ["notNull(x);"]) == ("notNull(x);", False)
    assert run("Validate.", ["Vali", "dator()"]) == ("Validator()", False)  # departs after a shared start
    assert run("Validate.", ["Vali"]) == ("Vali", False)  # the stream ended inside the receiver
    assert run("", ["Validate.x"]) == ("Validate.x", False)


def test_holds_back_no_more_than_the_receiver():
    s = ReceiverStutter("ab.")
    assert s.feed("a") == ""
    assert s.feed("x") == "ax"  # departed: everything held goes on
    assert s.feed("y") == "y"
