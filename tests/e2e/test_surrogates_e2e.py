"""A lone UTF-16 surrogate in an open document, over real stdio (QA B2).

JSON may carry ``"\\ud83d"`` alone: an editor whose buffer holds half of a surrogate pair
sends it so, and Python decodes it to a lone surrogate code point, which UTF-8 cannot
encode. Such text must never break a request, in its own document nor in another one
whose prompt carries it as a cross-file snippet: what goes upstream has it replaced
(U+FFFD, one UTF-16 unit, as the surrogate was), while positions in the document keep
counting it as the editor does.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

KEY = "sk-test-surrogate-0123456789"
S = "file:///w/s.py"
A = "file:///w/a.py"
S_TEXT = 'def helper_total(xs):\n    """Total for the caf\ud83d."""\n    return sum(xs)\n\nx = "\ud83d" + \n'
A_TEXT = "import s\n\ndef main():\n    total = helper_total([1, 2])\n    \n"


def _completions(sim):
    return [r for r in sim.requests if r.path.endswith("/completions") and r.body]


@pytest.mark.timeout(90)
async def test_lone_surrogate_never_breaks_a_request(tmp_path):
    log = tmp_path / "sidecar.jsonl"
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as sim:
        sim.set_responder(lambda body: "42")
        env = sidecar_env(
            tmp_path,
            SILICONFLOW_API_KEY=KEY,
            SIDECAR_BASE_URL=sim.base_url,
            SIDECAR_CACHE="false",
            SIDECAR_LOG_FILE=str(log),
        )
        init = {"debounceMinMs": 0, "debounceMaxMs": 0, "prefetchEnabled": False}
        async with sidecar(env, init_options=init) as client:
            open_doc(client, S, S_TEXT)
            open_doc(client, A, A_TEXT)
            # a.py calls helper_total: its prompt carries s.py's definition as a snippet
            a = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(A, 4, 4)), 30)
            # in s.py itself, after the surrogate on the same line: column 11 counts it as one unit
            s = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(S, 4, 11)), 30)
    reqs = _completions(sim)
    assert len(reqs) == 2, [r.body for r in reqs]
    a_prompt, s_prompt = (r.body["prompt"] for r in reqs)
    assert "def helper_total(xs):" in a_prompt and "Total for the caf\ufffd." in a_prompt, a_prompt
    assert s_prompt.endswith('x = "\ufffd" + '), s_prompt  # the cursor offset is right
    for answer in (a, s):
        assert answer is not None and answer.items[0].insert_text == "42"
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    errors = [r for r in records if r["level"] in ("error", "critical")]
    assert not errors, errors
    assert not [r for r in records if "never retrieved" in r["msg"] or "surrogate" in r.get("exc", "")]
