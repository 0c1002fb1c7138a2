"""The SQLite completion cache for real: an entry outliving its TTL in real time, two
processes writing one file, and end to end over stdio. The in-process tests on a real
file are tests/unit/test_cache.py."""

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
from devtools.simulator import LatencyModel, SimulatedBackend
from support.cache import key, make

pytestmark = pytest.mark.timeout(120)
KEY = "sk-cache-test-SECRET-0042"


# ------------------------------------------------------------------ real file, real time
async def test_ttl_expires_entries(tmp_path):
    c = await make(tmp_path / "c.sqlite3", ttl_s=1)
    c.put(key("a = "), "1", partial=False)
    await c.store.flush()
    assert await c.lookup(key("a = "))
    await asyncio.sleep(1.2)
    assert await c.lookup(key("a = ")) is None
    await c.close()


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
        subprocess.Popen(
            [sys.executable, "-c", script, tag, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT
        )
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
        from lsprotocol import types

        # a.py closed first: an open a.py would be b.py's cross-file context (another key).
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri="file:///w/a.py"))
        )
        open_doc(client, "file:///w/b.py", typed)  # the user typed "retu"
        through = await ask(client, "file:///w/b.py", 3, 8)
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


async def test_corrupt_cache_file_still_serves(tmp_path, sim):
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"SQLite format 3\x00" + os.urandom(4096 - 16))  # a cache file gone bad
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


@pytest.mark.parametrize("which", ["config", "notes"])
async def test_a_cache_path_naming_another_file_leaves_it_untouched(tmp_path, sim, which):
    # SIDECAR_CACHE_PATH pointing at the config file itself, or at any text file: the file
    # stays byte for byte, the server serves (memory cache only) with one warning naming
    # the path, and `sidecar cache stats` works and leaves it alone too.
    config_text = b'# my settings\nlocal_model = "smollm2-135m"\n'
    (tmp_path / "config.toml").write_bytes(config_text)
    path = tmp_path / ("config.toml" if which == "config" else "notes.txt")
    if which == "notes":
        path.write_bytes(b"shopping list\n- milk\n")
    before = path.read_bytes()
    log = tmp_path / "sidecar.jsonl"
    env = sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY=KEY,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_CACHE_PATH=str(path),
        SIDECAR_LOG_FILE=str(log),
    )
    sim.set_responder(lambda body: "42")
    from lsprotocol import types

    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", "x = \n")
        result = await ask(client, "file:///w/a.py", 0, 4)
        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert result.items[0].insert_text == "42"
    assert stats["cache"]["persistent"] is False and "left untouched" in stats["cache"]["persistence_off_reason"]
    assert path.read_bytes() == before and (tmp_path / "config.toml").read_bytes() == config_text
    assert not [p.name for p in tmp_path.iterdir() if ".corrupt-" in p.name or p.name.endswith(("-wal", "-shm"))]
    import json

    warnings = [r["msg"] for r in map(json.loads, log.read_text().splitlines()) if r["level"] == "warning"]
    about = [m for m in warnings if str(path) in m]
    assert len(about) == 1 and "left untouched" in about[0] and "cache_path" in about[0], warnings
    st = subprocess.run(
        [sys.executable, "-m", "sidecar", "cache", "stats"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert st.returncode == 0 and '"persistent": false' in st.stdout, st.stdout + st.stderr
    assert str(path) in st.stderr and "left untouched" in st.stderr, st.stderr
    assert path.read_bytes() == before


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
