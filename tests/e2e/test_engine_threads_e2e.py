"""The managed engine under load (sidecar/backends/engine_threads.py), for real: the
sidecar over stdio with the embedded engine (llama-cpp-python, SmolLM2 on the CPU) while
busy programs at normal priority take CPUs. The engine computes with the CPUs they leave
free (its log says so) and the suggestion still comes."""

from __future__ import annotations

import asyncio
import sys

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from sidecar.backends.engine_threads import usable_cpus
from sidecar.models.hardware import default_threads

pytestmark = pytest.mark.timeout(240)


@pytest.mark.skipif(default_threads() < 2, reason="the engine runs one thread on this machine: none to take away")
async def test_busy_programs_take_threads_from_the_engine_and_the_suggestion_still_comes(tmp_path):
    limit = default_threads()
    # Enough busy programs that fewer CPUs than the engine's threads are left free.
    hogs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", "while True: pass")
        for _ in range(usable_cpus() - limit + 1)
    ]
    try:
        env = sidecar_env(tmp_path)
        uri = "file:///tmp/area.py"
        text = "import math\n\n\ndef circle_area(r):\n    return "
        async with sidecar(env) as client:
            open_doc(client, uri, text)
            result = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params(uri, 4, 11)), 180
            )
            updates = client.sidecar_updates
            t_end = asyncio.get_running_loop().time() + 120
            while not (result and result.items) and not any(u["done"] and u["items"] for _t, u in updates):
                assert asyncio.get_running_loop().time() < t_end, "no suggestion came under load"
                await asyncio.sleep(0.1)
    finally:
        for h in hogs:
            h.kill()
            await h.wait()
    log = (tmp_path / "state" / "sidecar" / "log" / "engine.log").read_text(errors="replace")
    changes = [line for line in log.splitlines() if "(decode)" in line and "CPUs busy" in line]
    assert changes, "the engine never took a thread away:\n" + log[-2000:]
    assert f"threads {limit} -> " in changes[0], changes
