"""The request shapes for external local engines (llama-server's /infill, Ollama's
/api/generate). The engines themselves, played by the simulator over real HTTP on
loopback, are tests/e2e/test_engines_e2e.py."""

from __future__ import annotations

import pytest

from sidecar.completion.prompts import generate_request, infill_request
from support.engines import MID_LINE, MODEL, ctx_at

# -- request shapes ----------------------------------------------------------------


def test_infill_request_shape():
    ctx = ctx_at(MID_LINE)
    extra = [{"filename": "util.py", "text": "def sub(a, b):\n    return a - b\n"}]
    req = infill_request(ctx, max_tokens=48, temperature=0.1, extra=extra)
    assert (req.endpoint, req.strategy) == ("infill", "infill")
    assert req.body["input_prefix"] == ctx.prefix and req.body["input_prefix"].endswith("print(add")
    assert req.body["input_suffix"] == ctx.suffix and req.body["input_suffix"].startswith("(1, 2)")
    assert req.body["input_extra"] == extra
    assert req.body["n_predict"] == 48 and req.body["temperature"] == 0.1
    assert req.body["cache_prompt"] is True
    assert req.body["stop"] == ["\n"] and len(req.body["stop"]) <= 4
    assert infill_request(ctx_at(), max_tokens=8, temperature=0.0).body["input_extra"] == []
    with pytest.raises(ValueError):
        infill_request(ctx, max_tokens=8, temperature=0.0, extra=[{"filename": "x.py"}])


def test_generate_request_shape():
    ctx = ctx_at()
    fim = generate_request(ctx, model=MODEL, fim=True, max_tokens=64, temperature=0.2)
    assert (fim.endpoint, fim.strategy) == ("api/generate", "suffix")
    assert fim.body["prompt"] == ctx.prefix and fim.body["suffix"] == ctx.suffix
    assert fim.body["raw"] is False and fim.body["keep_alive"] == "30m"
    assert fim.body["options"] == {"num_predict": 64, "temperature": 0.2, "stop": ["\n\n"]}
    plain = generate_request(ctx, model=MODEL, fim=False, max_tokens=64, temperature=0.2, keep_alive="-1")
    assert plain.strategy == "prefix" and plain.body["raw"] is True and "suffix" not in plain.body
    assert plain.body["keep_alive"] == "-1"


def test_llama_cpp_requests_carry_no_repetition_penalty():
    # llama-cpp-python's server penalizes repeats (1.1) over the last 64 tokens by default,
    # which in a FIM prompt are the suffix: the body must turn it off; a cloud body has no
    # such field (SiliconFlow's API does not document it).
    from sidecar.completion.prompts import build_request

    ctx = ctx_at(MID_LINE)
    local = build_request(
        ctx, "template", api="llama-cpp-python", model="qwen2.5-coder-0.5b-instruct", max_tokens=16, temperature=0
    )
    assert local.body["repeat_penalty"] == 1.0
    cloud = build_request(
        ctx, "suffix", api="siliconflow", model="Qwen/Qwen2.5-Coder-7B-Instruct", max_tokens=16, temperature=0
    )
    assert "repeat_penalty" not in cloud.body
