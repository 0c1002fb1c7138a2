"""Two-phase healed streams (completion/healing/phases.py) keep the token
log-probabilities of both phases on the one list the confidence gate reads: the first
line of a healed suggestion spans the constrained phase and the plain one."""

from __future__ import annotations

import asyncio

from sidecar.backends.base import StreamInfo, UpstreamRequest
from sidecar.completion.healing.phases import stream_healed


def test_both_phases_log_probabilities_reach_the_info():
    sent: list[dict] = []

    async def backend(req: UpstreamRequest, info: StreamInfo):
        # A stand-in for an engine's stream; the first phase is closed once the heal is out.
        sent.append(req.body)
        toks = [("total", -0.1), (" =", -0.2)] if "grammar" in req.body else [(" = 0", -0.3), ("\n", -0.4)]
        for tok, lp in toks:
            info.events += 1
            info.token_logprobs.append((tok, lp))
            yield tok

    async def run() -> tuple[str, StreamInfo]:
        info = StreamInfo()
        req = UpstreamRequest("completions", {"prompt": "x = ", "grammar": "root ::= ...", "max_tokens": 16}, "prefix")
        out = ""
        async for d in stream_healed(backend, req, info, "llama-cpp-python", "tot"):
            out += d
        return out, info

    out, info = asyncio.run(run())
    assert len(sent) == 2 and "grammar" not in sent[1]  # two phases were run
    assert out == "total = 0\n"
    assert [lp for _, lp in info.token_logprobs] == [-0.1, -0.3, -0.4]
