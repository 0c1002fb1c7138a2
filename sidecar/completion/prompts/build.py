"""Turn a completion context into an upstream request: native FIM field, FIM template,
chat, or a plain prefix prompt.

Strategies (docs/architecture.md, "Facts we checked"):
- ``suffix``: ``POST /completions`` with ``prompt`` = prefix and ``suffix`` (SiliconFlow's
  FIM for the models its FIM guide lists). vLLM, llama-server and llama-cpp-python reject
  or mishandle ``suffix``, so it is never chosen for them.
- ``template``: ``POST /completions`` with a prompt built from the model family's FIM
  special tokens.
- ``chat``: ``POST /chat/completions`` asking for the missing middle; SiliconFlow also
  takes top-level ``prefix``/``suffix`` fields.
- ``prefix``: ``POST /completions`` with the prefix alone (models without FIM training,
  such as the embedded SmolLM2).
"""

from __future__ import annotations

import dataclasses

from ...backends.base import UpstreamRequest
from ..context import CompletionContext
from ..dialects import MAX_STOP_SEQUENCES, dialect_for
from ..families import template_for
from ..healing import HealingPlan
from . import snippets

__all__ = ["build_request", "choose_strategy", "stop_sequences"]


def choose_strategy(api: str, model: str, setting: str, rejected: frozenset[str] = frozenset()) -> str:
    """Pick ``suffix`` | ``template`` | ``chat`` | ``prefix`` | ``infill`` for a backend
    speaking wire format ``api`` (``Backend.api``) and ``model``: that dialect's
    choice (``dialects.py``). ``setting`` is the user's ``fim`` setting (``auto`` lets
    the dialect decide); ``rejected`` holds strategies this model already refused."""
    return dialect_for(api).strategy(model, setting, rejected)


def stop_sequences(
    ctx: CompletionContext, extra: tuple[str, ...] = (), limit: int | None = MAX_STOP_SEQUENCES
) -> list[str]:
    """Stop sequences (at most ``limit``, SiliconFlow's four by default; None: all): one line when text follows the cursor; up to the first
    blank line on a blank cursor line; no line-break stop at the end of a non-blank line;
    then the family's end-of-text tokens.

    At the end of a non-blank line a model often begins with a blank line (``import os``
    then ``\\n\\ndef main():``): a ``"\\n\\n"`` stop would end that stream before its
    first character, and a stop string cannot say "a blank line after some text". There
    the streaming filter ends the answer instead (``postprocess.line_policy``: one line,
    or up to the first blank line after text) and closes the stream. On a blank cursor
    line the model starts with text or one break (recorded golden cases), so the cheaper
    upstream stop stays."""
    if ctx.mid_line:
        stops = ["\n"]
    elif ctx.line_prefix.strip():
        stops = []
    else:
        stops = ["\n\n"]
    for s in extra:
        if s and s not in stops:
            stops.append(s)
    return stops[:limit] if limit is not None else stops


_CHAT_SYSTEM = (
    "You are a code completion engine. Reply with only the code that belongs at <CURSOR>, "
    "with no explanation and no markdown fences. Do not repeat code before or after the cursor."
)


def build_request(
    ctx: CompletionContext,
    strategy: str,
    *,
    api: str,
    model: str,
    max_tokens: int,
    temperature: float,
    heal: HealingPlan | None = None,
) -> UpstreamRequest:
    """The request body for ``strategy`` (see module doc) in wire format ``api``
    (``Backend.api``, a dialect of ``dialects.py``). ``max_tokens`` counts model tokens.

    With a ``heal`` plan (:mod:`.healing`) the prompt is built from the prefix without
    the heal, ``max_tokens`` grows by the heal's estimated tokens, and a constrained plan
    adds its GBNF ``grammar`` to the body (llama-cpp-python, llama-server)."""
    if heal is not None and heal.active:
        req = build_request(
            heal.healed_context(ctx),
            strategy,
            api=api,
            model=model,
            max_tokens=max_tokens + heal.extra_tokens,
            temperature=temperature,
        )
        grammar = heal.grammar()
        if grammar is not None:
            req.body["grammar"] = grammar
        return req
    # Other files' snippets (crossfile/, rendered by snippets.py): a comment block before
    # the prefix, unless the format has its own place for them (Qwen's repository format,
    # /infill, chat).
    lead = snippets.comment_block(ctx.snippets, ctx.language, ctx.path)
    dialect = dialect_for(api)
    if dialect.infill and strategy == "infill":
        from .infill import infill_request

        return infill_request(ctx, max_tokens=max_tokens, temperature=temperature)
    if dialect.generate:
        from .ollama import generate_request

        octx = dataclasses.replace(ctx, prefix=lead + ctx.prefix) if lead else ctx
        return generate_request(
            octx, model=model, fim=strategy == "suffix", max_tokens=max_tokens, temperature=temperature
        )
    tmpl = template_for(model)
    common: dict = {"max_tokens": max_tokens, "temperature": temperature}
    if dialect.llama_cpp:
        # llama.cpp keeps the KV cache of a prompt prefix it has seen (llama-cpp-python
        # does so on its own; llama-server needs cache_prompt): user and prefetch prompts
        # share their beginning, so only the new tail is evaluated.
        common["cache_prompt"] = True
        # No repetition penalty: llama-cpp-python's server applies 1.1 by default over the
        # last 64 tokens, which in a FIM prompt are the suffix and the FIM tokens, so the
        # identifiers a completion most often needs to repeat were penalized (measured on
        # the quality fixtures: docs/architecture.md, "Local code models").
        common["repeat_penalty"] = 1.0
    if strategy == "suffix":
        body = {"prompt": lead + ctx.prefix, "suffix": ctx.suffix, "stop": stop_sequences(ctx), **common}
        return UpstreamRequest("completions", body, strategy)
    if strategy == "template" and tmpl is not None:
        body = {
            "prompt": (
                snippets.repo_block(ctx.snippets, ctx.repo, ctx.path) + tmpl.render(ctx.prefix, ctx.suffix)
                if tmpl.repo_format
                else tmpl.render(lead + ctx.prefix, ctx.suffix)
            ),
            # Local engines take every stop; SiliconFlow at most four.
            "stop": stop_sequences(ctx, tmpl.stops, dialect.max_stops),
            **common,
        }
        return UpstreamRequest("completions", body, "template")
    if strategy == "chat":
        user = f"{snippets.chat_section(ctx.snippets)}Language: {ctx.language}\n\n{ctx.prefix}<CURSOR>{ctx.suffix}"
        body = {
            "messages": [{"role": "system", "content": _CHAT_SYSTEM}, {"role": "user", "content": user}],
            "stop": stop_sequences(ctx),
            **common,
        }
        if dialect.chat_fim_fields:
            body["prefix"] = ctx.prefix
            body["suffix"] = ctx.suffix
        return UpstreamRequest("chat/completions", body, "chat")
    # prefix-only continuation
    body = {"prompt": lead + ctx.prefix, "stop": stop_sequences(ctx, ("<|im_end|>", "<|endoftext|>")), **common}
    return UpstreamRequest("completions", body, "prefix")
