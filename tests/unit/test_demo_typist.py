"""Fast unit tests of the demo's typing model (no server, no sleeping)."""

from __future__ import annotations

import statistics

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from sidecar.tools.demo.runner import DEFAULT_FILE
from sidecar.tools.demo.typist import (
    PAUSE_AFTER,
    TypingModel,
    apply_insert,
    choose_region,
    plan_typing,
    position_at,
    utf16_len,
)

# Non-ASCII on purpose: U+1F600 and U+1D11E are two UTF-16 units each, é and 价 one.
UNICODE_DOC = """\
# Prices in € and ¥, with a few emoji 😀 to keep editors honest.

PRICES = {"café": 3, "价格": 7}


def label(name: str) -> str:
    \"\"\"Decorate a name: 😀 then the name, then 𝄞.\"\"\"
    mark = "😀" if name.startswith("é") else "𝄞"
    return f"{mark} {name} — 价 {PRICES.get(name, 0)}"


def total(names: list[str]) -> int:
    \"\"\"Sum the prices of names; unknown ones cost 0 €.\"\"\"
    return sum(PRICES.get(n, 0) for n in names)
"""


def test_plan_is_deterministic_for_a_seed():
    doc = DEFAULT_FILE.read_text(encoding="utf-8")
    a = plan_typing(doc, pauses=8, seed=7)
    b = plan_typing(doc, pauses=8, seed=7)
    c = plan_typing(doc, pauses=8, seed=8)
    assert a == b
    assert [k.delay_s for k in a.keystrokes] != [k.delay_s for k in c.keystrokes]


def test_intervals_are_positive_with_the_right_median_and_scale():
    doc = DEFAULT_FILE.read_text(encoding="utf-8")
    plan = plan_typing(doc, pauses=8, seed=3)
    assert all(k.delay_s > 0 for k in plan.keystrokes)
    assert all(k.look_s > 0 for k in plan.keystrokes if k.pause)

    slow, fast = TypingModel(seed=1), TypingModel(seed=1, speed=4.0)
    plain_slow = [slow.interval_s("a") for _ in range(2000)]
    plain_fast = [fast.interval_s("a") for _ in range(2000)]
    assert 0.105 < statistics.median(plain_slow) < 0.135  # median ~120 ms at speed 1
    assert statistics.median(plain_fast) == pytest.approx(statistics.median(plain_slow) / 4)
    enter = [TypingModel(seed=2).interval_s("\n    ") for _ in range(200)]
    assert statistics.median(enter) > 2 * statistics.median(plain_slow)  # pause at line ends


def test_pauses_are_where_a_person_stops_and_spread_out():
    doc = DEFAULT_FILE.read_text(encoding="utf-8")
    plan = plan_typing(doc, pauses=8, seed=0)
    stops = [k for k in plan.keystrokes if k.pause]
    assert len(stops) == 8
    for key in stops:
        assert key.reason == "end of line" or key.text in PAUSE_AFTER
    typed = len(plan.typed_text)
    offsets = sorted(k.offset - plan.region.start for k in stops)
    assert offsets[0] < typed / 4 and offsets[-1] > 3 * typed / 4


def test_region_leaves_the_cursor_on_an_empty_line():
    doc = DEFAULT_FILE.read_text(encoding="utf-8")
    for seed in range(5):
        region = choose_region(doc, pauses=8, seed=seed)
        assert region.start == 0 or doc[region.start - 1] == "\n"
        assert doc[region.end :].startswith("\n") or region.end == len(doc)
        assert region.end - region.start >= 300


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_incremental_changes_rebuild_the_file_in_utf16_units(seed):
    plan = plan_typing(UNICODE_DOC, pauses=4, seed=seed, region=None)
    # The server's view: pygls applies each change with its UTF-16 position codec.
    server_doc = TextDocument("file:///tmp/x.py", plan.opened_text, version=1)
    ours = plan.opened_text
    for key in plan.keystrokes:
        at = types.Position(line=key.line, character=key.character)
        server_doc.apply_change(
            types.TextDocumentContentChangePartial(range=types.Range(start=at, end=at), text=key.text)
        )
        # Independently: the position's character is the UTF-16 length of the line so far.
        line_start = ours.rfind("\n", 0, key.offset) + 1
        assert key.character == len(ours[line_start : key.offset].encode("utf-16-le")) // 2
        assert (key.line, key.character) == position_at(ours, key.offset)
        ours = apply_insert(ours, key.line, key.character, key.text)
    assert server_doc.source == UNICODE_DOC
    assert ours == UNICODE_DOC


def test_astral_characters_count_two_units():
    region_start = UNICODE_DOC.index("def label")
    from sidecar.tools.demo.typist import Region

    end = UNICODE_DOC.index("\n\n\ndef total")
    plan = plan_typing(UNICODE_DOC, pauses=2, seed=0, region=Region(region_start, end))
    after_emoji = next(
        k for k in plan.keystrokes if k.offset > 0 and UNICODE_DOC[k.offset - 1] == "😀" and k.text == '"'
    )
    line_text = UNICODE_DOC.split("\n")[after_emoji.line]
    code_points = UNICODE_DOC[: after_emoji.offset].rsplit("\n", 1)[1]
    assert line_text.startswith(code_points)
    assert after_emoji.character == len(code_points) + 1  # the emoji is 2 units, 1 code point
    assert utf16_len("😀𝄞é") == 5
