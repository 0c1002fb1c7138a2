"""The cache's lifecycle: shutdown racing the stats tick, close after close, use after
close, and a cache file deleted while the sidecar runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from conftest import client_capabilities, inline_params, make_client, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.completion.cache import CacheKey, CompletionCache
from sidecar.completion.cache.flusher import FLUSH_S

pytestmark = pytest.mark.timeout(120)
KEY = "sk-cache-lifecycle-0042"


def key(prefix: str, suffix: str = "\n") -> CacheKey:
    return CacheKey(backend="siliconflow:https://x/v1", model="m", language="python", prefix=prefix, suffix=suffix)


def new_cache(path: Path) -> CompletionCache:
    return CompletionCache(path, max_entries=1000, max_bytes=1 << 24, ttl_s=3600)


def corrupt_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if ".corrupt-" in p.name)


def worker_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if "_connection_worker_thread" in t.name and t.is_alive()]


async def no_worker_left(baseline: set[threading.Thread], timeout: float = 5.0) -> list[threading.Thread]:
    deadline = time.monotonic() + timeout
    while True:
        left = [t for t in worker_threads() if t not in baseline]
        if not left or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.01)


def rows(path: Path) -> dict[str, str]:
    con = sqlite3.connect(path, timeout=5)
    try:
        return dict(con.execute("SELECT key, text FROM entries"))
    except sqlite3.OperationalError as exc:  # just recreated: the schema is not in yet
        if "no such table" not in str(exc):
            raise
        return {}
    finally:
        con.close()


# ------------------------------------------------------------------ direct, many interleavings
async def test_close_racing_stats_at_many_interleavings(tmp_path):
    """Shutdown (close) while stats queries, lookups and the open itself are in flight, at
    60 interleavings: the file is never taken for corrupt, close always returns, no worker
    thread is left, and the rows written survive."""
    path = tmp_path / "c.sqlite3"
    seed = new_cache(path)
    await seed.open()
    seed.put(key("x = "), "1", partial=False)
    await seed.close()
    baseline = set(worker_threads())
    for i in range(60):
        cache = new_cache(path)
        opener = asyncio.ensure_future(cache.open())  # the service spawns the open; stats come at once
        stop = asyncio.Event()

        async def hammer() -> None:
            while not stop.is_set():
                await cache.stats()
                await cache.lookup(key("x = "))
                await asyncio.sleep(0)

        hammers = [asyncio.ensure_future(hammer()) for _ in range(3)]
        cache.put(key(f"y{i} = "), f"{i}", partial=False)
        if i < 30:  # event-loop turns: inside the open, the first queries, the first flush
            for _ in range(i * 2):
                await asyncio.sleep(0)
        else:  # wall-clock offsets up to ~0.3 s: the flush task and the queries interleave
            await asyncio.sleep((i - 30) * 0.01)
        await asyncio.wait_for(cache.close(), 10)
        await asyncio.wait_for(cache.close(), 1)  # idempotent
        stop.set()
        await asyncio.wait_for(asyncio.gather(*hammers, opener), 5)
        # After close: harmless answers, no reconnect.
        st = await cache.stats()
        assert st["disk"] == {"entries": 0, "bytes": 0} and not st["persistent"]
        await cache.lookup(key("x = "))  # the memory layer may answer; nothing reconnects
        assert cache.put(key("z = "), "2", partial=False)
        assert cache.store._db is None
        assert corrupt_files(tmp_path) == [], f"interleaving {i} moved the file aside"
        assert path.exists()
        left = await no_worker_left(baseline)
        assert not left, f"interleaving {i} left {len(left)} worker thread(s) running"
    assert "1" in rows(path).values()


async def test_errors_after_close_or_misuse_are_not_corruption(tmp_path):
    path = tmp_path / "c.sqlite3"
    cache = new_cache(path)
    await cache.open()
    store = cache.store
    db = store._db
    # A misuse error on the live connection: logged, the file is kept.
    await store._on_error(sqlite3.ProgrammingError("Cannot operate on a closed database."), db)
    await store._on_error(ValueError("Connection closed"), db)
    await asyncio.sleep(FLUSH_S * 3)
    assert corrupt_files(tmp_path) == [] and store.enabled and store._db is db
    await cache.close()
    # Even real corruption signs after close do nothing.
    await store._on_error(sqlite3.DatabaseError("file is not a database"), db)
    store._move_aside("late")
    assert corrupt_files(tmp_path) == [] and path.exists()
    assert await store.get_many([key("a").digest()]) == {}
    assert await store.clear() == 0
    await store.flush()
    assert not await store.open()  # no reconnect after close
    assert store._db is None


async def test_real_corruption_is_still_moved_aside(tmp_path):
    path = tmp_path / "c.sqlite3"
    cache = new_cache(path)
    await cache.open()
    store = cache.store
    reopens = store.reopens
    await store._on_error(sqlite3.DatabaseError("database disk image is malformed"), store._db)
    deadline = time.monotonic() + 10
    # Wait for the reconnect to finish (``reopens``).
    while not corrupt_files(tmp_path) or store._db is None or store.reopens == reopens:
        assert time.monotonic() < deadline, "a malformed file was not moved aside and recreated"
        await asyncio.sleep(0.02)
    assert store.enabled and path.exists()
    cache.put(key("after = "), "1", partial=False)
    await store.flush()
    assert "1" in rows(path).values()
    await cache.close()


async def test_a_reconnect_never_shows_a_file_without_its_table(tmp_path):
    # While the flush task recreates a moved-aside file, every connection the store hands
    # out (``_db``) already has the schema: a lookup in between is a miss, never
    # "no such table".
    path = tmp_path / "c.sqlite3"
    cache = new_cache(path)
    await cache.open()
    store = cache.store
    seen: list[object] = [store._db]
    for _ in range(3):
        reopens = store.reopens
        await store._on_error(sqlite3.DatabaseError("database disk image is malformed"), store._db)
        deadline = time.monotonic() + 10
        while store.reopens == reopens:
            assert time.monotonic() < deadline, "the malformed file was not recreated"
            db = store._db
            if db is not None and db not in seen:
                seen.append(db)
                async with db.execute("SELECT COUNT(*) FROM entries") as cur:  # raises without the table
                    await cur.fetchone()
            await asyncio.sleep(0)
        assert store._db is not None and store._db not in seen
        async with store._db.execute("SELECT COUNT(*) FROM entries") as cur:
            assert (await cur.fetchone())[0] == 0
        seen.append(store._db)
    await cache.close()


async def test_close_during_open_leaves_nothing_running(tmp_path):
    baseline = set(worker_threads())
    for i in range(10):
        cache = new_cache(tmp_path / "c.sqlite3")
        opener = asyncio.ensure_future(cache.open())
        for _ in range(i):
            await asyncio.sleep(0)
        await asyncio.wait_for(cache.close(), 10)
        await asyncio.wait_for(opener, 5)
        assert cache.store._db is None and cache.store._flusher is None
        assert not await no_worker_left(baseline)
    assert corrupt_files(tmp_path) == []


@pytest.mark.parametrize("companions", [False, True], ids=["main-file", "with-wal-and-shm"])
async def test_deleted_file_is_recreated_and_keeps_persisting(tmp_path, companions):
    path = tmp_path / "c.sqlite3"
    cache = new_cache(path)
    await cache.open()
    cache.put(key("before = "), "1", partial=False)
    await cache.store.flush()
    assert "1" in rows(path).values()
    os.remove(path)
    if companions:
        for suffix in ("-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(str(path) + suffix)
    deadline = time.monotonic() + 10
    while not path.exists():
        assert time.monotonic() < deadline, "the deleted cache file was not recreated"
        await asyncio.sleep(0.02)
    cache.put(key("after = "), "2", partial=False)
    deadline = time.monotonic() + 10
    while "2" not in rows(path).values():
        assert time.monotonic() < deadline, "a completion after the deletion did not persist"
        await asyncio.sleep(0.05)
    assert cache.store.enabled and cache.store.disabled_reason is None
    await cache.close()
    assert set(rows(path).values()) == {"2"}
    assert corrupt_files(tmp_path) == []


async def test_write_refused_because_the_file_moved_recreates_it(tmp_path):
    """SQLite refuses writes to a deleted file ("attempt to write a readonly database"):
    that recreates the file instead of turning persistence off."""
    path = tmp_path / "c.sqlite3"
    cache = new_cache(path)
    await cache.open()
    cache.put(key("before = "), "1", partial=False)
    await cache.store.flush()
    os.remove(path)
    cache.put(key("after = "), "2", partial=False)
    await cache.store.flush()  # before the flush task noticed
    deadline = time.monotonic() + 10
    while not (path.exists() and "2" in rows(path).values()):
        assert time.monotonic() < deadline, "the row written after the deletion was lost"
        await asyncio.sleep(0.05)
    assert cache.store.enabled and cache.store.disabled_reason is None
    await cache.close()


# ------------------------------------------------------------------ real stdio
@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=3)) as s:
        yield s


async def _session_shut_down_at(tmp_path: Path, sim, offset_s: float) -> tuple[float, Path]:
    """One sidecar over stdio: a completion is stored, then shutdown and exit are sent
    ``offset_s`` seconds after initialize (around the 2 s stats tick). Returns how long
    the process took to exit after exit was sent."""
    home = tmp_path / f"s{offset_s:.2f}"
    home.mkdir()
    cache_path = home / "completions.sqlite3"
    env = sidecar_env(
        home,
        SILICONFLOW_API_KEY=KEY,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_CACHE_PATH=str(cache_path),
        SIDECAR_LOG_FILE="off",
    )
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=env, client_factory=make_client
    )
    client = await config.start()
    try:
        await client.initialize_session(types.InitializeParams(capabilities=client_capabilities()))
        t0 = time.monotonic()
        uri = f"file:///w/s{offset_s:.2f}.py"
        open_doc(client, uri, "def f():\n    \n")
        await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 1, 4)), 10)
        await asyncio.sleep(max(0.0, offset_s - (time.monotonic() - t0)))
        await asyncio.wait_for(client.shutdown_async(None), 10)
        client.exit(None)
        t_exit = time.monotonic()
        try:
            await asyncio.wait_for(client._server.wait(), 10)
        except TimeoutError:
            client._server.kill()
            pytest.fail(f"the sidecar did not exit within 10 s of exit (shutdown {offset_s:.2f} s after initialize)")
        return time.monotonic() - t_exit, cache_path
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()
        await client.stop()


async def test_shutdown_around_the_stats_tick_over_stdio(tmp_path, sim):
    """Seven real sessions shutting down 1.7 .. 2.3 s after initialize (the second stats
    tick is at 2 s), run side by side: every process exits, no file is moved aside, and the
    stored completion is in each file."""
    sim.script(["return 1"] * 7)
    offsets = [1.7 + 0.1 * i for i in range(7)]
    results = await asyncio.gather(*(_session_shut_down_at(tmp_path, sim, off) for off in offsets))
    assert corrupt_files(tmp_path) == []
    for (exit_s, cache_path), off in zip(results, offsets):
        assert exit_s < 8, f"exit took {exit_s:.1f} s (shutdown at {off:.2f} s)"
        assert cache_path.exists(), f"shutdown at {off:.2f} s lost the cache file"
        assert "return 1" in rows(cache_path).values(), f"shutdown at {off:.2f} s lost the stored completion"


async def test_cache_file_deleted_while_running_is_recreated_over_stdio(tmp_path, sim):
    cache_path = tmp_path / "completions.sqlite3"
    env = sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY=KEY,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_CACHE_PATH=str(cache_path),
        SIDECAR_LOG_FILE="off",
    )
    sim.script(["return 1", "return 2"])
    async with sidecar(env) as client:
        open_doc(client, "file:///w/a.py", "def a():\n    \n")
        assert (await client.text_document_inline_completion_async(inline_params("file:///w/a.py", 1, 4))) is not None
        deadline = time.monotonic() + 10
        while not (cache_path.exists() and "return 1" in rows(cache_path).values()):
            assert time.monotonic() < deadline, "the first completion was not stored"
            await asyncio.sleep(0.05)
        os.remove(cache_path)
        deadline = time.monotonic() + 10
        while not cache_path.exists():
            assert time.monotonic() < deadline, "the deleted cache file was not recreated"
            await asyncio.sleep(0.05)
        open_doc(client, "file:///w/b.py", "def b():\n    \n")
        assert (await client.text_document_inline_completion_async(inline_params("file:///w/b.py", 1, 4))) is not None
        deadline = time.monotonic() + 10
        while "return 2" not in rows(cache_path).values():
            assert time.monotonic() < deadline, "a completion after the deletion did not persist"
            await asyncio.sleep(0.05)
        stats = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
    assert stats["cache"]["persistent"] is True
    assert set(rows(cache_path).values()) == {"return 2"}
    assert corrupt_files(tmp_path) == []
