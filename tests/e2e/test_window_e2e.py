"""The context window as a latency budget (completion/window.py): the samples the service
records from real streams, the simulator over real HTTP (the rule and its hysteresis:
tests/unit/test_window.py)."""

from __future__ import annotations


async def test_service_records_samples_from_real_streams_and_a_fast_backend_keeps_the_maxima():
    from devtools.simulator import LatencyModel, SimulatedBackend
    from sidecar.completion.context import build_context
    from sidecar.completion.postprocess import StreamFilter
    from sidecar.completion.service import CompletionService
    from sidecar.config import Settings

    async with SimulatedBackend(latency=LatencyModel(ttft_ms=15, tokens_per_s=1000, seed=2)) as sim:
        sim.set_responder(lambda body: "x")
        s = Settings(
            api_key="sk-test-window-0123456789",
            base_url=sim.base_url,
            cache_enabled=False,
            target_ttft_ms=300,
            prefetch_enabled=False,
        )
        svc = CompletionService(s, on_error=lambda e: None)
        try:
            text = "".join(f"value_{i} = compute({i}, {i * 7})\n" for i in range(400))
            for n in range(5):
                cut = len(text) - 20 + n  # the same document, one more character each time
                ctx = build_context(text[:cut], cut, "python", *svc.context_budget.windows())
                out = await svc.runner.run(ctx, StreamFilter(ctx))
                assert out.error is None
            budget = next(iter(svc.context_budget._windows.values()))
            samples = list(budget.samples)
            # The first stream made the backend warm; the rest were recorded, each with
            # only the tail after the shared beginning as new tokens.
            assert len(samples) == 4
            assert all(x.new_tokens < x.total_tokens / 4 and x.total_tokens > 900 for x in samples), samples
            assert svc.context_budget.windows() == (1024, 256)
        finally:
            await svc.aclose()
