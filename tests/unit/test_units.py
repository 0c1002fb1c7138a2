"""Pure-function tests: positions, token windows, postprocessing, prompts, error mapping, config."""

from __future__ import annotations

import pytest

from sidecar import config
from sidecar.backends import errors
from sidecar.completion import tokens
from sidecar.completion.context import CompletionContext, NotCompletable, build_context
from sidecar.completion.postprocess import StreamFilter, strip_suffix_overlap
from sidecar.completion.prompts import build_request, choose_strategy, stop_sequences
from sidecar.lsp.positions import InvalidPosition, offset_at, units_of
from sidecar.providers import SILICONFLOW


# ------------------------------------------------------------------ positions
def test_offset_utf16_surrogates_and_line_breaks():
    text = "a😀b\r\nx\ry\nz"
    assert offset_at(text, 0, 3) == 2  # after the emoji (2 UTF-16 units)
    assert offset_at(text, 0, 4) == 3
    assert offset_at(text, 1, 1) == text.index("\ry")
    assert offset_at(text, 2, 0) == text.index("y")
    assert offset_at(text, 3, 1) == len(text)
    assert offset_at(text, 0, 2, "utf-32") == 2
    assert offset_at(text, 0, 5, "utf-8") == 2
    with pytest.raises(InvalidPosition):
        offset_at(text, 0, 2)  # inside the surrogate pair
    with pytest.raises(InvalidPosition):
        offset_at(text, 4, 0)
    assert offset_at(text, 1, 5) == text.index("\ry")  # past the line end: the line end
    assert units_of("😀é") == 3


def test_form_feed_is_not_a_line_break():
    assert offset_at("a\x0cb\nc", 1, 0) == 4


# ------------------------------------------------------------------ token windows
def test_windows_fit_budget_and_start_on_a_line():
    text = "".join(f"value_{i} = compute({i}, {i * 2})\n" for i in range(500))
    tail = tokens.tail(text, 100)
    assert tokens.count(tail) <= 100
    assert text.endswith(tail) and tail.startswith("value_")
    head = tokens.head(text, 50)
    assert tokens.count(head) <= 50 and text.startswith(head) and head.endswith("\n")
    assert tokens.tail("short", 100) == "short"


def test_context_windows_and_binary():
    text = "x" * 10 + "\n" + "def f():\n    ret" + "urn 1\n" * 2000
    off = text.index("ret") + 3
    ctx = build_context(text, off, "python", 64, 32)
    assert ctx.line_prefix == "    ret" and ctx.line_suffix == "urn 1"
    assert tokens.count(ctx.suffix) <= 32 and tokens.count(ctx.prefix) <= 64
    with pytest.raises(NotCompletable):
        build_context("abc\x00def", 3, "python", 64, 32)


# ------------------------------------------------------------------ postprocessing
def ctx_of(prefix: str, suffix: str) -> CompletionContext:
    return build_context(prefix + suffix, len(prefix), "python", 512, 512)


def feed_all(ctx, text, step=3):
    f = StreamFilter(ctx)
    stopped_at = None
    for i in range(0, len(text), step):
        if f.feed(text[i : i + step]):
            stopped_at = i
            break
    return f.text(), stopped_at


def test_stop_before_repeated_suffix_line_and_close_early():
    ctx = ctx_of("def f(x):\n    ", "\n    return y\n")
    text, stopped = feed_all(ctx, "y = x + 1\n    return y\n" + "z" * 200)
    assert text == "y = x + 1"
    assert stopped is not None and stopped < 40  # the stream was told to stop long before its end


def test_mid_line_keeps_one_line_and_drops_overlap():
    ctx = ctx_of("print(", ")\nnext_line()\n")
    assert ctx.mid_line
    text, stopped = feed_all(ctx, "a, b)\nmore()\n")
    assert text == "a, b" and stopped is not None


def test_never_returns_text_already_after_cursor():
    assert strip_suffix_overlap("foo)", "foo)") == ""
    assert strip_suffix_overlap("x = 1", "1)") == "x = 1"  # a one-char word overlap is chance
    assert strip_suffix_overlap('name"]', '"]') == "name"
    assert strip_suffix_overlap("compute_total(items)", "total(items)") == "compute_"


def test_trailing_whitespace_trimmed():
    ctx = ctx_of("x = ", "")
    text, _ = feed_all(ctx, "[1, 2]   \n  \n\n")
    assert text == "[1, 2]"


# ------------------------------------------------------------------ prompts
def test_strategy_choice():
    assert choose_strategy("siliconflow", "Qwen/Qwen2.5-Coder-7B-Instruct", "auto") == "suffix"
    assert choose_strategy("siliconflow", "Qwen/Qwen2.5-Coder-7B-Instruct", "auto", frozenset({"suffix"})) == "template"
    assert choose_strategy("siliconflow", "Qwen/Qwen3-8B", "auto") == "chat"
    assert choose_strategy("openai", "bigcode/starcoder2-3b", "auto") == "template"
    assert choose_strategy("local", "SmolLM2-135M-Instruct", "auto") == "prefix"
    assert choose_strategy("openai", "anything", "chat") == "chat"


def test_templates_exact_strings_and_stop_limit():
    ctx = ctx_of("P", "S")
    ds = build_request(ctx, "template", api="openai", model="deepseek-coder-6.7b", max_tokens=8, temperature=0)
    assert ds.body["prompt"] == "<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>"
    cs = build_request(ctx, "template", api="openai", model="codestral-22b", max_tokens=8, temperature=0)
    assert cs.body["prompt"] == "[SUFFIX]S[PREFIX]P"
    assert len(stop_sequences(ctx, ("a", "b", "c", "d", "e"))) == 4


# ------------------------------------------------------------------ errors
def test_siliconflow_error_bodies():
    e = errors.classify(
        400,
        b'{"code":20012,"message":"Model does not exist. Please check it carefully.","data":null}',
        backend="SiliconFlow",
        model="m",
    )
    assert e.kind == errors.MODEL_NOT_FOUND
    e = errors.classify(
        429,
        b'{"code":50603,"message":"Request was rejected due to rate limiting. Details: TPM limit reached.","data":null}',
        backend="SiliconFlow",
        model="m",
    )
    assert e.kind == errors.RATE_LIMITED and "TPM" in e.message
    assert errors.classify(401, b"Invalid token", backend="S", model="m").kind == errors.BAD_KEY
    assert (
        errors.classify(503, b'{"code":50505,"message":"Model service overloaded"}', backend="S", model="m").kind
        == errors.OVERLOADED
    )
    assert (
        errors.classify(400, b'{"message":"bad suffix"}', backend="S", model="m", used_suffix=True).kind
        == errors.FIM_UNSUPPORTED
    )
    assert errors.classify(500, b"\xff\xfe garbage", backend="S", model="m").kind == errors.UNKNOWN


# ------------------------------------------------------------------ config
def test_config_validation_messages():
    with pytest.raises(config.ConfigError, match="max_tokens.*integer"):
        config.normalize({"maxTokens": "many"}, "test")
    with pytest.raises(config.ConfigError, match="one of auto, cloud, local"):
        config.from_env({"SIDECAR_MODE": "gpu"})
    with pytest.raises(config.ConfigError, match="http"):
        config.normalize({"base_url": "ftp://x"}, "test")
    s = config.build(config.from_env({"SILICONFLOW_API_KEY": "sk-secret"}))
    assert s.resolved_provider == "siliconflow" and s.resolved_base_url == "https://api.siliconflow.cn/v1"
    assert "sk-secret" not in repr(s) and "sk-secret" not in str(s.public_dict())
    s = config.build({"api_key": "k", "siliconflow_region": "com"})
    assert s.resolved_base_url == "https://api.siliconflow.com/v1"
    # A self-hosted base URL is the OpenAI shape whichever variable holds the key; only
    # provider = "siliconflow" sends SiliconFlow's shape (and default model) there.
    env = {"SILICONFLOW_API_KEY": "sk-secret", "SIDECAR_BASE_URL": "http://127.0.0.1:8000/v1"}
    s = config.build(config.from_env(env))
    assert (s.resolved_provider, s.resolved_model, s.api_key) == ("openai", "default", "sk-secret")
    s = config.build(config.from_env({**env, "SIDECAR_PROVIDER": "siliconflow"}))
    assert (s.resolved_provider, s.resolved_model) == ("siliconflow", SILICONFLOW.default_model)
    assert s.resolved_base_url == "http://127.0.0.1:8000/v1"
    assert (
        config.build(
            config.from_env({**env, "SIDECAR_BASE_URL": "https://api.siliconflow.cn.evil.com/v1"})
        ).resolved_provider
        == "openai"
    )


def test_config_file(tmp_path):
    p = tmp_path / "c.toml"
    p.write_text('[sidecar]\nmodel = "a/b"\nmax_tokens = 10\n')
    assert config.from_file(p) == {"model": "a/b", "max_tokens": 10}
    p.write_text("not = [valid")
    with pytest.raises(config.ConfigError, match="cannot read config file"):
        config.from_file(p)
    assert config.from_file(tmp_path / "missing.toml") == {}


def test_end_of_line_keeps_a_next_line_suggestion():
    ctx = ctx_of("def f(r):\n    result = r * r", "\n")
    assert not ctx.multiline and not ctx.mid_line
    text, stopped = feed_all(ctx, "\n    return result\n    print(result)\n")
    assert text == "\n    return result" and stopped is not None
    text, _ = feed_all(ctx_of("x = ", "\n"), " compute()\nmore()\n")
    assert text == "compute()"  # the cursor line ends with a space: no second one (postprocess rule 2)


def test_prefix_window_start_is_stable_while_typing():
    # A long file: the prefix window is cut by the budget; typing at the end should keep
    # its start on a 16-line grid, so consecutive prompts share their beginning.
    body = "".join(f"item_{i} = compute({i})\n" for i in range(3000))
    starts = []
    text = body
    for k in range(40):
        text = text + ("\n" if k % 8 == 7 else "x")
        ctx = build_context(text, len(text), "python", 256, 32, cursor_line=text.count("\n"))
        assert tokens.count(ctx.prefix) <= 256
        starts.append(ctx.prefix.split("\n", 1)[0])
        first_line = text.count("\n") - ctx.prefix.count("\n")
        assert first_line % 16 == 0
    assert len(set(starts)) <= 2
