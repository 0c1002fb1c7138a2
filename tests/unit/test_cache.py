"""The SQLite completion cache: unit tests on a real file, in process (the TTL's real wait,
two writer processes and the sidecar over stdio are tests/e2e/test_cache_e2e.py)."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from sidecar.completion.cache.connection import SCHEMA_VERSION
from support.cache import key, make

pytestmark = pytest.mark.timeout(120)


async def test_lookback_typing_through_and_layers(tmp_path):
    path = tmp_path / "c.sqlite3"
    c = await make(path)
    c.put(key("def f():\n    "), "return compute(a, b)", partial=False)
    hit = await c.lookup(key("def f():\n    ret"))
    assert hit and hit.layer == "memory" and hit.typed == 3 and hit.text[3:] == "urn compute(a, b)"
    assert await c.lookup(key("def f():\n    rex")) is None  # typed text disagrees
    assert await c.lookup(key("def f():\n    ", suffix="\nother\n")) is None  # suffix changed
    assert await c.lookup(key("def f():\n    ", model="other")) is None
    await c.close()
    c2 = await make(path)  # a new process: memory is empty, the file answers
    hit = await c2.lookup(key("def f():\n    return"))
    assert hit and hit.layer == "sqlite" and hit.text[6:] == " compute(a, b)"
    again = await c2.lookup(key("def f():\n    return"))
    assert again.layer == "memory"  # promoted
    await c2.close()


async def test_partial_stream_keeps_whole_lines_only(tmp_path):
    c = await make(tmp_path / "c.sqlite3")
    assert not c.put(key("x = "), "half a li", partial=True)
    assert c.put(key("def g():\n"), "    a = 1\n    b = ", partial=True)
    hit = await c.lookup(key("def g():\n"))
    assert hit.text == "    a = 1" and hit.partial
    c.put(key("def g():\n"), "    a = 1\n    b = 2", partial=False)  # a later stream replaces it
    hit = await c.lookup(key("def g():\n"))
    assert hit.text.endswith("b = 2") and not hit.partial
    await c.close()


async def test_eviction_keeps_bounds(tmp_path):
    c = await make(tmp_path / "c.sqlite3", max_entries=200, max_bytes=1 << 20)
    for i in range(2000):
        c.put(key(f"line_{i} = "), f"value_{i} * {i}", partial=False)
        if i % 100 == 99:
            await c.store.flush()
    await c.store.flush()
    await c.store._enforce_bounds()
    await c.store._db.commit()
    st = await c.stats()
    assert st["disk"]["entries"] <= 200
    assert st["memory"]["entries"] <= 100 and st["memory"]["bytes"] <= 1 << 20
    assert await c.lookup(key("line_1999 = ")) is not None  # the most recent survive
    assert await c.lookup(key("line_0 = ")) is None
    await c.close()
    c = await make(tmp_path / "b.sqlite3", max_entries=10_000, max_bytes=1 << 20)
    big = "x" * 20_000
    for i in range(200):
        c.put(key(f"b{i} = "), big, partial=False)
    await c.store.flush()
    await c.store._enforce_bounds()
    await c.store._db.commit()
    assert (await c.stats())["disk"]["bytes"] <= 1 << 20
    await c.close()


async def test_file_mode_0600_and_no_secrets(tmp_path):
    path = tmp_path / "c.sqlite3"
    c = await make(path)
    c.put(key("a = "), "1", partial=False)
    await c.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


async def test_corrupt_cache_file_is_moved_aside(tmp_path, caplog):
    # A cache file gone bad: SQLite's header, then garbage.
    path = tmp_path / "c.sqlite3"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(8192 - 16))
    c = await make(path)
    assert c.store.enabled
    c.put(key("a = "), "1", partial=False)
    await c.store.flush()
    assert await c.lookup(key("a = "))
    await c.close()
    moved = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1
    assert sum("moved it to" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize(
    "content",
    [b'local_model = "auto"\n', b"SQLite format 2\x00", b"\x00" * 4096],
    ids=["text", "other-header", "zeros"],
)
async def test_a_file_that_is_not_a_cache_is_left_untouched(tmp_path, caplog, content):
    # A cache path that names someone else's file (the config, notes): never moved or
    # written; persistence is off with one warning that names it; the memory layer works.
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    c = await make(path)
    assert not c.store.enabled
    c.put(key("a = "), "1", partial=False)
    assert await c.lookup(key("a = "))
    await c.close()
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and str(path) in warned[0] and "left untouched" in warned[0], warned
    assert "cache_path" in warned[0] and "new file" in warned[0]


async def test_old_schema_is_rebuilt(tmp_path):
    path = tmp_path / "c.sqlite3"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE entries (k TEXT, v TEXT)")
    con.execute("PRAGMA user_version = 0")
    con.execute("INSERT INTO entries VALUES ('a', 'b')")
    con.execute("PRAGMA user_version = 99")
    con.commit()
    con.close()
    c = await make(path)
    c.put(key("a = "), "1", partial=False)
    await c.store.flush()
    await c.close()
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 1
    con.close()


async def test_unwritable_location_turns_persistence_off(tmp_path, caplog):
    c = await make(tmp_path / "a-file" / "c.sqlite3") if (tmp_path / "a-file").write_text("x") else None
    assert c is not None and not c.store.enabled
    c.put(key("a = "), "1", partial=False)  # the memory layer still works
    assert await c.lookup(key("a = "))
    await c.close()
    assert sum("persistence is off" in r.getMessage() for r in caplog.records) == 1
