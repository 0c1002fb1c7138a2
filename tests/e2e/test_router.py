"""Auto mode's circuit breaker with two real HTTP backends (simulators on loopback)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from devtools.simulator import Fault, LatencyModel, SimulatedBackend
from sidecar.backends.base import StreamInfo, UpstreamRequest
from sidecar.backends.errors import BackendError
from sidecar.backends.openai_compat import OpenAICompatBackend
from sidecar.backends.router import RouterBackend

pytestmark = pytest.mark.timeout(30)


async def run(router: RouterBackend) -> tuple[str, str]:
    """One stream through the router, as the service does: pick, stream, record."""
    target = router.pick()
    text, err = "", None
    try:
        async with contextlib.aclosing(
            target.stream(UpstreamRequest("completions", {"prompt": "x = ", "max_tokens": 8}, "prefix"), StreamInfo())
        ) as s:
            async for d in s:
                text += d
    except BackendError as e:
        err = e
    router.record(target, err)
    return ("local" if target is router.local else "cloud"), (text if err is None else f"error:{err.kind}")


async def test_breaker_opens_to_cloud_and_closes_back_to_local():
    lat = LatencyModel(ttft_ms=1, tokens_per_s=2000, seed=1)
    async with SimulatedBackend(latency=lat) as local_sim, SimulatedBackend(latency=lat) as cloud_sim:
        local_sim.set_responder(lambda b: "local")
        cloud_sim.set_responder(lambda b: "cloud")
        local = OpenAICompatBackend(name="local", provider="local", base_url=local_sim.base_url, model="m")
        cloud = OpenAICompatBackend(name="cloud", provider="openai", base_url=cloud_sim.base_url, model="m")
        switches: list[str] = []
        router = RouterBackend(local, cloud, lambda side, why: switches.append(side), cooldown_s=0.3)
        await router.prewarm()
        await asyncio.sleep(0.1)  # the local side reports ready
        assert await run(router) == ("local", "local")
        local_sim.inject(Fault.siliconflow("overloaded"), persistent=True)
        assert await run(router) == ("local", "error:overloaded")
        assert await run(router) == ("local", "error:overloaded")  # second failure opens the breaker
        assert await run(router) == ("cloud", "cloud")
        assert await run(router) == ("cloud", "cloud")
        local_sim.clear_faults()
        await asyncio.sleep(0.35)  # cooldown over: half-open, try local again
        assert await run(router) == ("local", "local")
        assert await run(router) == ("local", "local")
        await router.aclose()
    assert switches == ["local", "cloud", "local"]
