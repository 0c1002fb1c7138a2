"""The line-break lift over real stdio against the simulated SiliconFlow backend: at the
end of a finished line the prompt ends with the line break and the suggestion starts
with it (prompts/eol.py); in the middle of a word nothing changes."""

from __future__ import annotations

import asyncio

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)

KEY = "sk-test-eol-lift-1234567890"
TEXT = "def mean(xs):\n    total = sum(xs)\n\nprint(mean([1, 2]))\n"


async def ask_once(tmp_path, output: str, line: int, character: int):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=500, seed=1)) as sim:
        sim.script([output])
        env = sidecar_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")
        async with sidecar(env) as client:
            open_doc(client, "file:///w/mean.py", TEXT)
            result = await asyncio.wait_for(
                client.text_document_inline_completion_async(inline_params("file:///w/mean.py", line, character)), 20
            )
        bodies = [r.body for r in sim.requests if r.path.endswith("/completions")]
    return result, bodies


async def test_end_of_a_finished_line_prompts_on_the_next_line(tmp_path):
    result, bodies = await ask_once(tmp_path, "    return total / len(xs)", 1, len("    total = sum(xs)"))
    assert bodies and bodies[0]["prompt"].endswith("    total = sum(xs)\n")
    assert bodies[0]["suffix"].startswith("\n\nprint(")  # the document's own break stays in the suffix
    assert result is not None and result.items[0].insert_text == "\n    return total / len(xs)"


async def test_with_text_after_the_cursor_the_prompt_is_the_text_before_it(tmp_path):
    _result, bodies = await ask_once(tmp_path, "m", 1, len("    total = su"))
    assert bodies and bodies[0]["prompt"].endswith("    total = su")  # no break added
    assert bodies[0]["suffix"].startswith("m(xs)\n")
