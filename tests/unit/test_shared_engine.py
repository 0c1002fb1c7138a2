"""The simulated shared engine in process: the prefix cache in PSM order and the config's
checks (over real HTTP: tests/e2e/test_shared_engine_e2e.py)."""

from __future__ import annotations

import pytest

from devtools.simulator import EngineConfig
from devtools.simulator.shared_engine import SharedEngine, engine_prompt
from support.shared_engine import completion_body

pytestmark = pytest.mark.timeout(60)


async def test_the_suffix_after_a_changed_prefix_is_recomputed():
    """PSM order: a change before the cursor invalidates the suffix's cached blocks."""
    engine = SharedEngine(EngineConfig(overhead_ms=0, prefill_tps=1e9, decode_tps=1e6))
    suffix = "\nreturn x\n" * 30
    async with engine.sequence(engine_prompt(completion_body("a = 1\n" * 10, suffix=suffix))) as s1:
        await s1.prefill()
    async with engine.sequence(engine_prompt(completion_body("a = 1\n" * 10, suffix=suffix))) as s2:
        await s2.prefill()
    async with engine.sequence(engine_prompt(completion_body("a = 1\n" * 10 + "b", suffix=suffix))) as s3:
        await s3.prefill()
    assert s2.prefill_tokens < 16  # all but the last partial block reused
    assert s3.prefill_tokens > count_suffix_tokens(suffix) - 16


def count_suffix_tokens(text: str) -> int:
    from devtools.simulator.tokens import count_tokens

    return count_tokens(text)


def test_config_validates_units():
    with pytest.raises(ValueError):
        EngineConfig(prefill_tps=0)
    with pytest.raises(ValueError):
        EngineConfig(capacity=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        EngineConfig(batch_slowdown=-1)
    assert EngineConfig.from_dict({"capacity": 3}).capacity == 3
