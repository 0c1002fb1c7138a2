"""RetentionTracker (completion/retention.py) on its own: edits by range, full-text
changes, a copy that drifted from the editor's, and CRLF documents. Without a running
event loop the horizons are measured when the document closes."""

from __future__ import annotations

from types import SimpleNamespace as NS

from sidecar.completion.retention import RetentionTracker, summary
from sidecar.lsp.positions import offset_at
from sidecar.metrics import Metrics


def change(sl, sc, el, ec, text):
    return NS(range=NS(start=NS(line=sl, character=sc), end=NS(line=el, character=ec)), text=text)


def locate(text, line, character):
    return offset_at(text, line, character, "utf-16")


class Doc:
    def __init__(self, text):
        self.text = text

    def apply(self, *changes):
        for c in changes:
            if getattr(c, "range", None) is None:
                self.text = c.text
            else:
                s = locate(self.text, c.range.start.line, c.range.start.character)
                e = locate(self.text, c.range.end.line, c.range.end.character)
                self.text = self.text[:s] + c.text + self.text[e:]


def setup(text, prefix, taken, eol="\n"):
    m = Metrics()
    doc = Doc(text)
    tr = RetentionTracker(m, text_of=lambda uri: doc.text, horizons_s=(30, 120))
    tr.accepted("u", prefix, taken, eol)
    return m, doc, tr


def rows(m):
    return {r["after"]: (r["accepted_chars"], r["retained_chars"]) for r in summary(m.snapshot()["counters"])}


def test_range_edits_in_one_notification_shift_and_delete():
    m, doc, tr = setup("x = f(a, b)\n", "x = ", "f(a, b)")
    # One notification, two changes: the second's range is in the text the first left.
    changes = [change(0, 0, 0, 0, "yy"), change(0, 8, 0, 10, "")]  # insert "yy", delete "a,"
    doc.apply(*changes)
    tr.changed("u", changes, locate)
    assert doc.text == "yyx = f( b)\n"
    tr.closed("u")
    assert rows(m) == {"30s": (7, 5), "120s": (7, 5)}


def test_full_text_change_is_diffed_as_one_edit():
    m, doc, tr = setup("a = 1\n", "a = ", "compute(x)")
    doc.text = "a = compute(x)\n"  # the insertion, then a full-text replacement
    tr.changed("u", [], locate)
    full = NS(text="a = compute(y)\n")
    doc.apply(full)
    tr.changed("u", [full], locate)
    tr.closed("u")
    assert rows(m)["30s"] == (10, 9)  # "x" became "y"


def test_a_drifted_copy_is_resynced_from_the_editor_text():
    m, doc, tr = setup("v = \n", "v = ", "value")
    doc.text = "v = value\n"
    tr.changed("u", [], locate)  # placed now
    doc.text = "v = val\n"  # the editor changed it without telling us the range
    tr.changed("u", [], locate)
    tr.closed("u")
    assert rows(m)["120s"] == (5, 3)


def test_crlf_line_breaks_are_not_counted_twice():
    taken = "a = 1\nb = 2"
    m, doc, tr = setup("x\r\n" + taken.replace("\n", "\r\n") + "\r\n", "x\n", taken, eol="\r\n")
    tr.closed("u")
    assert rows(m)["30s"] == (len(taken), len(taken))


def test_text_never_inserted_is_not_followed():
    m, doc, tr = setup("nothing here\n", "nothing ", "else")
    assert tr.following() == 0
    tr.closed("u")
    assert rows(m) == {}
