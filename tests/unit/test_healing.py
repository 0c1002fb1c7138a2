"""Token healing (completion/healing.py): the prompt backs up to a token boundary and the
answer must start with what was cut. Unit tables for the plan, the grammar (and the
vendored llama.cpp's parser of it, in process) and the streaming unhealer. The real
embedded engine over stdio LSP and the simulator over real HTTP are
tests/e2e/test_healing_e2e.py."""

from __future__ import annotations

import dataclasses

import pytest

from sidecar import config
from sidecar.completion.context import build_context
from sidecar.completion.healing import (
    MAX_SPACE_CHARS,
    MAX_WORD_CHARS,
    NO_HEALING,
    HealingPlan,
    Unhealer,
    gbnf_literal,
    grammar_for,
    plan_for,
    split_heal,
)
from sidecar.completion.prompts import build_request

pytestmark = pytest.mark.timeout(240)


# -- the plan ------------------------------------------------------------------------

SPLITS = [
    # prefix, whitespace heals allowed, expected heal
    ("    clo", True, "clo"),  # indentation is never cut
    ("x = 1\n    return fibo", True, " fibo"),  # the space a BPE word token carries
    ("x = 1\n    return fibo", False, " fibo"),
    ("        self.restval ", True, " "),  # whitespace-only heal (constrained engines)
    ("        self.restval ", False, ""),  # ... never where output is only filtered
    ("a = b +\t", True, "\t"),
    ("a = b +  \t ", True, "  \t "),
    ("def f():\n    ", True, ""),  # an indented blank line stays whole
    ("def f():\n\t\t", True, ""),
    ("def f():\n", True, ""),  # nothing to cut after a line break
    ("x = 1\n", True, ""),
    ("foo(", True, ""),  # punctuation ends a token anyway
    ("a.b", True, "b"),
    ("self.f.wr", True, "wr"),
    ("x = 1\nabc", True, "abc"),
    ("abc", True, ""),  # the whole prompt: never cut to nothing
    ("  abc", True, "abc"),
    ("", True, ""),
    ("x = é", True, " é"),  # identifier characters are Unicode
    ("名 = 变量", True, " 变量"),
    ("x = '😀", True, ""),  # an emoji is not an identifier character
    ("n = 12", True, " 12"),
    ("a = " + "x" * MAX_WORD_CHARS, True, " " + "x" * MAX_WORD_CHARS),
    ("a = " + "x" * (MAX_WORD_CHARS + 1), True, ""),  # too long a run: left alone
    ("a =" + " " * (MAX_SPACE_CHARS + 1) + "w", True, "w"),  # too much space: the word alone
    ("a =" + " " * MAX_SPACE_CHARS + "w", True, " " * MAX_SPACE_CHARS + "w"),
    ("a =" + " " * (MAX_SPACE_CHARS + 1), True, ""),
]


@pytest.mark.parametrize("prefix, whitespace, heal", SPLITS)
def test_split_heal(prefix, whitespace, heal):
    prompt, got = split_heal(prefix, whitespace=whitespace)
    assert got == heal
    assert prompt + got == prefix
    if got:
        assert prompt, "the prompt was cut to nothing"
        assert "\n" not in got


def ctx_of(text: str, offset: int | None = None):
    offset = len(text) if offset is None else offset
    return build_context(text, offset, "python", 1024, 256)


PLANS = [
    # api, strategy, prefix, expected heal, constrained
    ("llama-cpp-python", "prefix", "x = 1\ny = fo", " fo", True),
    ("llama-cpp-python", "template", "x = 1\ny = fo", " fo", True),
    ("llama-cpp-python", "prefix", "x = 1\ny = ", " ", True),
    ("llama-server", "infill", "x = 1\ny = fo", " fo", True),
    ("llama-server", "prefix", "x = 1\ny = ", " ", True),
    ("ollama", "suffix", "x = 1\ny = fo", " fo", False),
    ("ollama", "prefix", "x = 1\ny = ", "", False),  # whitespace alone: not healed where only filtered
    ("siliconflow", "suffix", "x = 1\ny = fo", " fo", False),
    ("siliconflow", "template", "x = 1\ny = fo", " fo", False),
    ("openai", "prefix", "x = 1\ny = fo", " fo", False),
    ("siliconflow", "chat", "x = 1\ny = fo", "", False),  # a chat answer starts a new message
    ("openai", "chat", "x = 1\ny = ", "", False),
]


@pytest.mark.parametrize("api, strategy, prefix, heal, constrained", PLANS)
def test_plan_for(api, strategy, prefix, heal, constrained):
    # ``format_total`` after the cursor: "fo" looks unfinished (filtered backends heal only then).
    ctx = ctx_of(prefix + "\nz = format_total(2)\n", len(prefix))
    plan = plan_for(ctx, api=api, strategy=strategy)
    assert plan.heal == heal
    if heal:
        assert plan.constrained is constrained
        assert plan.prompt_prefix + heal == ctx.prefix
        assert (plan.grammar() is not None) is constrained
        assert plan.extra_tokens >= 1
    else:
        assert plan == NO_HEALING and plan.grammar() is None and plan.extra_tokens == 0


UNFINISHED = [
    # prefix, suffix, filtered backends heal?
    ("x = 1", "\nprint(x)\n", False),  # a finished number
    ("import os", "\nos.getcwd()\n", False),  # the word occurs whole
    ("total = 0\nreturn total", "\n", False),  # finished: seen whole before
    ("def fibonacci(n):\n    return fibo", "\n", True),  # only a longer identifier starts with it
    ("    clo", "se(fd)\n", False),  # nothing longer in the windows: left alone
    ("fd.close()\n    clo", "\n", True),
]


@pytest.mark.parametrize("prefix, suffix, healed", UNFINISHED)
def test_filtered_backends_heal_only_unfinished_words(prefix, suffix, healed):
    ctx = ctx_of(prefix + suffix, len(prefix))
    assert bool(plan_for(ctx, api="siliconflow", strategy="suffix").heal) is healed
    assert plan_for(ctx, api="llama-cpp-python", strategy="prefix").heal  # a grammar always heals


def test_healed_context_cuts_only_the_prompt():
    ctx = ctx_of("def f(a):\n    return a.fo\n", len("def f(a):\n    return a.fo"))
    plan = plan_for(ctx, api="llama-cpp-python", strategy="prefix")
    healed = plan.healed_context(ctx)
    assert plan.heal == "fo"
    assert healed.prefix == "def f(a):\n    return a."
    assert healed == dataclasses.replace(ctx, prefix=healed.prefix)  # the cursor's line is the cursor's
    assert ctx.prefix.endswith("a.fo")  # the context itself (the cache key) is unchanged
    assert NO_HEALING.healed_context(ctx) is ctx


# -- requests ------------------------------------------------------------------------

REQUESTS = [
    # api, strategy, model, field holding the prompt
    ("llama-cpp-python", "prefix", "SmolLM2-135M-Instruct", "prompt"),
    ("llama-cpp-python", "template", "qwen2.5-coder-1.5b", "prompt"),
    ("llama-server", "infill", "qwen2.5-coder-1.5b", "input_prefix"),
    ("llama-server", "prefix", "qwen2.5-coder-1.5b", "prompt"),
    ("ollama", "suffix", "qwen2.5-coder:1.5b", "prompt"),
    ("ollama", "prefix", "llama3", "prompt"),
    ("siliconflow", "suffix", "Qwen/Qwen2.5-Coder-7B-Instruct", "prompt"),
    ("siliconflow", "template", "Qwen/Qwen2.5-Coder-7B-Instruct", "prompt"),
    ("openai", "prefix", "gpt-3.5-turbo-instruct", "prompt"),
]


@pytest.mark.parametrize("api, strategy, model, field", REQUESTS)
def test_build_request_uses_the_healed_prefix(api, strategy, model, field):
    text = "import os\n\njournal = []\n\ndef f(path):\n    return os.path.jo\n\nprint(f('.'))\n"
    ctx = ctx_of(text, text.index("jo\n") + 2)
    plan = plan_for(ctx, api=api, strategy=strategy)
    assert plan.heal == "jo"
    plain = build_request(ctx, strategy, api=api, model=model, max_tokens=32, temperature=0.0)
    healed = build_request(ctx, strategy, api=api, model=model, max_tokens=32, temperature=0.0, heal=plan)
    assert healed.strategy == plain.strategy and healed.endpoint == plain.endpoint
    assert plain.body[field].endswith("os.path.jo") or "os.path.jo<" in plain.body[field]
    assert "os.path.jo" not in healed.body[field] and "os.path." in healed.body[field]
    assert plain.body[field].replace("os.path.jo", "os.path.", 1) == healed.body[field]
    if plan.constrained:
        assert healed.body["grammar"] == grammar_for("jo")
    else:
        assert "grammar" not in healed.body
    assert "grammar" not in plain.body
    stops = (lambda b: b["options"]["stop"]) if api == "ollama" else (lambda b: b.get("stop"))
    assert stops(healed.body) == stops(plain.body)  # stop rules follow the cursor, not the prompt
    limit = "n_predict" if api == "llama-server" and strategy == "infill" else "max_tokens"
    got = healed.body["options"]["num_predict"] if api == "ollama" else healed.body[limit]
    assert got == 32 + plan.extra_tokens


def test_no_heal_plan_leaves_the_request_alone():
    ctx = ctx_of("x = fo")
    a = build_request(ctx, "prefix", api="llama-cpp-python", model="m", max_tokens=8, temperature=0.0)
    b = build_request(ctx, "prefix", api="llama-cpp-python", model="m", max_tokens=8, temperature=0.0, heal=NO_HEALING)
    assert a == b


def test_token_healing_setting():
    assert config.build().token_healing is True
    assert config.build(config.normalize({"tokenHealing": False}, "initializationOptions")).token_healing is False
    assert config.build(config.from_env({"SIDECAR_TOKEN_HEALING": "off"})).token_healing is False


# -- the grammar ---------------------------------------------------------------------

LITERALS = [
    ("fibo", '"fibo"'),
    (" fo", '" fo"'),
    ("\t", '"\\t"'),
    ('"', '"\\x22"'),
    ("\\", '"\\x5C"'),
    ("a]b[c", '"a\\x5Db\\x5Bc"'),
    ("é", '"\\u00E9"'),
    ("变量", '"\\u53D8\\u91CF"'),
    ("😀", '"\\U0001F600"'),
    ("\n\r", '"\\n\\r"'),
    ("# x", '"\\x23 x"'),
]


@pytest.mark.parametrize("text, literal", LITERALS)
def test_gbnf_literal(text, literal):
    assert gbnf_literal(text) == literal


def test_grammar_shape():
    assert grammar_for(" fibo") == 'root ::= " fibo" .*\n'
    assert HealingPlan(heal="x", prompt_prefix="a ", constrained=False).grammar() is None


def test_vendored_llama_cpp_parses_every_grammar():
    """The engine's own GBNF parser (the llama.cpp inside llama-cpp-python) accepts each
    grammar; a grammar it rejects would take the engine down with it."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from sidecar.backends.engine_setup import shipped_model_path

    llm = llama_cpp.Llama(str(shipped_model_path()), vocab_only=True, verbose=False)
    heals = [t for t, _ in LITERALS] + [h for _p, _w, h in SPLITS if h] + ["' \" \\ ` $ { } ( ) | * + ? . ::= <x> [^a]"]
    for heal in heals:
        sampler = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar_for(heal).encode(), b"root")
        assert sampler, f"llama.cpp rejected the grammar for {heal!r}"
        llama_cpp.llama_sampler_free(sampler)
    bad = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, b'root ::= "unterminated', b"root")
    assert not bad  # the check above can fail


# -- the unhealer --------------------------------------------------------------------

UNHEAL = [
    # heal, deltas, expected outputs per delta, mismatch at the end
    ("fibo", ["fibonacci(n)"], ["nacci(n)"], False),
    ("fibo", ["fi", "bo", "nacci"], ["", "", "nacci"], False),
    ("fibo", ["f", "ibon", "acci"], ["", "n", "acci"], False),
    ("fibo", ["fibo", "", "(n)"], ["", "", "(n)"], False),
    ("fibo", ["fib(n)"], [""], True),
    ("fibo", ["fi", "x", "bo"], ["", "", ""], True),
    ("fibo", ["(n)", "fibo"], ["", ""], True),
    (" ", [" = restval"], ["= restval"], False),
    (" ", ["= restval"], [""], True),
    (" ", ["  = x"], [" = x"], False),  # one space is the heal; a second is the model's
    ("", ["a", "", "b"], ["a", "", "b"], False),
    ("é", ["é1"], ["1"], False),
    ("ab", ["a"], [""], False),  # still pending
]


@pytest.mark.parametrize("heal, deltas, outs, mismatch", UNHEAL)
def test_unhealer(heal, deltas, outs, mismatch):
    u = Unhealer(heal)
    assert [u.feed(d) for d in deltas] == outs
    assert u.mismatch is mismatch
    if not mismatch:
        assert u.matched == (not u.pending)


def test_unhealer_after_match_passes_everything():
    u = Unhealer("ab")
    assert u.feed("abc") == "c" and u.matched and not u.pending
    assert u.feed("ab") == "ab"  # the heal is stripped once, at the start only


def test_plan_is_a_frozen_value():
    plan = HealingPlan(heal="a", prompt_prefix="x ", constrained=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.heal = "b"  # type: ignore[misc]
