"""The SQLite completion cache: unit tests on a real file, and end to end over stdio."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT, inline_params, open_doc, sidecar, sidecar_env
from sidecar.completion.cache import CacheKey, CompletionCache
from sidecar.completion.cache.store import SCHEMA_VERSION
from sidecar.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(120)
KEY = "sk-cache-test-SECRET-0042"


def key(prefix: str, suffix: str = "\n", model: str = "m") -> CacheKey:
    return CacheKey(backend="siliconflow:https://x/v1", model=model, language="python", prefix=prefix, suffix=suffix)


async def make(path, **kw) -> CompletionCache:
    c = CompletionCache(path, max_entries=kw.get("max_entries", 1000), max_bytes=kw.get("max_bytes", 1 << 24),
                        ttl_s=kw.get("ttl_s", 3600))
    await c.open()
    return c


# ------------------------------------------------------------------ unit, real file
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


async def test_ttl_expires_entries(tmp_path):
    c = await make(tmp_path / "c.sqlite3", ttl_s=1)
    c.put(key("a = "), "1", partial=False)
    await c.store.flush()
    assert await c.lookup(key("a = "))
    await asyncio.sleep(1.2)
    assert await c.lookup(key("a = ")) is None
    await c.close()


async def test_file_mode_0600_and_no_secrets(tmp_path):
    path = tmp_path / "c.sqlite3"
    c = await make(path)
    c.put(key("a = "), "1", partial=False)
    await c.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


async def test_random_bytes_file_is_moved_aside(tmp_path, caplog):
    path = tmp_path / "c.sqlite3"
    path.write_bytes(os.urandom(8192))
    c = await make(path)
    assert c.store.enabled
    c.put(key("a = "), "1", partial=False)
    await c.store.flush()
    assert await c.lookup(key("a = "))
    await c.close()
    moved = [p for p in tmp_path.iterdir() if ".corrupt-" in p.name]
    assert len(moved) == 1
    assert sum("moved it to" in r.getMessage() for r in caplog.records) == 1


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


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "shared.sqlite3"
    script = textwrap.dedent(
        """
        import asyncio, sys
        from sidecar.completion.cache import CacheKey, CompletionCache

        async def main(tag):
            c = CompletionCache(sys.argv[2], max_entries=100000, max_bytes=1 << 30, ttl_s=3600)
            await c.open()
            for i in range(3000):
                c.put(CacheKey("b", "m", "py", f"{tag}-{i} = ", "\\n"), f"v{i}", partial=False)
                if i % 50 == 0:
                    await asyncio.sleep(0)
            await c.close()
            print(c.store.write_errors)

        asyncio.run(main(sys.argv[1]))
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, tag, str(path)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=ROOT)
        for tag in ("p1", "p2")
    ]
    outs = [p.communicate(timeout=90) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
        assert out.decode().strip() == "0", err.decode()
        assert b"locked" not in err and b"busy" not in err, err.decode()
    con = sqlite3.connect(path)
    assert con.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 6000
    con.close()


# ------------------------------------------------------------------ end to end
@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=300, seed=2)) as s:
        yield s


def completions(sim):
    return [r for r in sim.requests if r.path.endswith("completions")]


async def ask(client, uri, line, col):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 20)


async def settle(client, sim):
    """Wait for the stream to end and the cache batch to reach the file."""
    await asyncio.sleep(0.6)


async def test_restart_keeps_hits_and_typing_through_needs_no_upstream(tmp_path, sim):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
    text = "import math\n\ndef area(r):\n    \n"
    sim.script(["return math.pi * r * r"])
    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", text)
        first = await ask(client, "file:///w/a.py", 3, 4)
        await settle(client, sim)
    assert first.items[0].insert_text == "return math.pi * r * r"
    assert len(completions(sim)) == 1
    async with sidecar(env) as client:  # a new process: only the SQLite file remembers
        open_doc(client, "file:///w/a.py", text)
        again = await ask(client, "file:///w/a.py", 3, 4)
        typed = text.replace("    \n", "    retu\n")
        open_doc(client, "file:///w/b.py", typed)  # the user typed "retu"
        through = await ask(client, "file:///w/b.py", 3, 8)
        from lsprotocol import types

        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert again.items[0].insert_text == "return math.pi * r * r"
    assert through.items[0].insert_text == "rn math.pi * r * r"
    assert len(completions(sim)) == 1  # no new upstream request
    assert stats["cache"]["hits"]["sqlite"] >= 1 and stats["cache"]["hits"]["memory"] >= 1
    path = tmp_path / "cache" / "sidecar" / "completions.sqlite3"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    blob = b"".join(p.read_bytes() for p in path.parent.iterdir() if p.is_file())
    assert KEY.encode() not in blob and b"Bearer" not in blob and b"Authorization" not in blob


@pytest.mark.parametrize("edit", ["delete_line_above", "change_suffix"])
async def test_stale_after_edit_misses(tmp_path, sim, edit):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
    text = "import math\nimport os\n\ndef area(r):\n    \n    return result\n"
    sim.set_responder(lambda body: "result = math.pi * r * r")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", text)
        await ask(client, "file:///w/a.py", 4, 4)
        await settle(client, sim)
        if edit == "delete_line_above":
            edited, line = text.replace("import os\n", ""), 3
        else:
            edited, line = text.replace("return result", "return area_value"), 4
        open_doc(client, "file:///w/b.py", edited)
        await ask(client, "file:///w/b.py", line, 4)
    assert len(completions(sim)) == 2  # the edited document missed the cache


async def test_random_bytes_cache_file_still_serves(tmp_path, sim):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(os.urandom(4096))
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE_PATH=str(path))
    sim.set_responder(lambda body: "42")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", "x = \n")
        result = await ask(client, "file:///w/a.py", 0, 4)
        from lsprotocol import types

        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert result.items[0].insert_text == "42"
    assert stats["cache"]["persistent"] is True
    assert any(".corrupt-" in p.name for p in tmp_path.iterdir())


async def test_clear_cache_command_and_cli(tmp_path, sim):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url)
    sim.set_responder(lambda body: "42")
    from lsprotocol import types

    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", "x = \n")
        await ask(client, "file:///w/a.py", 0, 4)
        await settle(client, sim)
        out = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.clearCache"))
        open_doc(client, "file:///w/b.py", "x = \n")
        await ask(client, "file:///w/b.py", 0, 4)
        await settle(client, sim)
    assert out == {"cleared": 1, "enabled": True}
    assert len(completions(sim)) == 2
    cli = [sys.executable, "-m", "sidecar", "cache"]
    st = subprocess.run(cli + ["stats"], env=env, capture_output=True, text=True, timeout=60)
    assert st.returncode == 0 and '"entries": 1' in st.stdout, st.stdout + st.stderr
    cl = subprocess.run(cli + ["clear"], env=env, capture_output=True, text=True, timeout=60)
    assert '"cleared": 1' in cl.stdout
    st = subprocess.run(cli + ["stats"], env=env, capture_output=True, text=True, timeout=60)
    assert '"entries": 0' in st.stdout
