"""Each backend wire format (a backend's ``api``) as one object: which prompt strategies
it takes and in what order, whether the request carries every stop sequence and asks
for the KV cache to be kept, how token healing works there, and which body builder
speaks it. Nothing else compares wire-format names: code asks :func:`dialect_for`
(``api`` is ``Backend.api``) and reads the answer. Who serves (the *provider*) and the
local engines are named in ``sidecar/providers.py``; a provider's backend speaks its
``Provider.api``.

Strategies (``prompts/build.py`` builds them): ``suffix`` (``prompt`` + ``suffix``: native FIM),
``template`` (the family's FIM tokens, ``families.py``), ``chat``, ``prefix`` (the prefix
alone), ``infill`` (llama-server ``/infill``). Facts behind each choice:
docs/architecture.md ("Facts we checked")."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .families import template_for

#: Models SiliconFlow's FIM guide lists for /v1/completions with ``suffix`` (the list
#: changes; an unlisted model that rejects ``suffix`` falls back at run time).
SILICONFLOW_NATIVE_FIM = re.compile(r"qwen2\.5-coder|deepseek-v3|deepseek-v2\.5|deepseek-coder", re.I)
MAX_STOP_SEQUENCES = 4  # SiliconFlow's limit for ``stop``
#: The dialect of a wire format sidecar does not know: plain OpenAI-compatible.
GENERIC_API = "openai"


@dataclass(frozen=True)
class Dialect:
    """How one wire format is spoken (module doc).

    ``order(model, setting)``: the strategies to try, best first. ``honours_setting``:
    a ``fim`` setting other than ``auto`` is used as given (else the engine decides the
    format itself). The body: ``/v1/completions`` or ``/v1/chat/completions``, except
    ``infill`` (llama-server's ``/infill`` for the ``infill`` strategy) and ``generate``
    (Ollama's ``/api/generate`` for every strategy).
    ``llama_cpp``: a llama.cpp engine: every stop sequence is sent, ``cache_prompt``
    asks it to keep the KV cache, and token healing is *constrained* by a GBNF grammar
    (else *filtered*: ``healing/plan.py``). ``grammar_phases``: the grammar is dropped
    once the heal is out (llama-cpp-python, ``healing/phases.py``). ``max_stops``: most
    stop sequences the API takes (None: any). ``logprobs``: see the field. ``chat_fim_fields``: chat requests also
    carry top-level ``prefix`` / ``suffix`` (SiliconFlow). ``native_fim``: the models
    documented to take native FIM (``suffix``) on this API, where that list decides the
    order (SiliconFlow's FIM guide); None where no such list exists."""

    name: str
    order: Callable[[str, str], list[str]]
    honours_setting: bool = True
    infill: bool = False
    generate: bool = False
    llama_cpp: bool = False
    grammar_phases: bool = False
    max_stops: int | None = None
    chat_fim_fields: bool = False
    native_fim: re.Pattern[str] | None = None
    #: Takes OpenAI's ``logprobs`` (1 on /v1/completions, true on chat) and streams them
    #: back (vLLM, SGLang, OpenAI-compatible servers, and the managed llama-cpp-python
    #: engine, whose launcher computes them without ``logits_all``:
    #: ``backends/engine_launcher.py``); asked only while the confidence gate is on.
    #: SiliconFlow does not document it; llama-server's ``/infill`` has its own shape
    #: (``n_probs``), not read here.
    logprobs: bool = False

    def strategy(self, model: str, setting: str, rejected: frozenset[str] = frozenset()) -> str:
        """The strategy for ``model`` under the ``fim`` ``setting``, skipping those the
        model already refused at run time (``rejected``)."""
        if self.honours_setting and setting != "auto" and setting not in rejected:
            return setting
        order = self.order(model, setting)
        for s in order:
            if s not in rejected:
                return s
        return order[-1]


def _siliconflow(model: str, setting: str) -> list[str]:
    order = ["suffix"] if SILICONFLOW_NATIVE_FIM.search(model) else []
    return order + (["template"] if template_for(model) else []) + ["chat"]


def _openai(model: str, setting: str) -> list[str]:
    return (["template"] if template_for(model) else []) + ["prefix"]


def _infill(model: str, setting: str) -> list[str]:
    # The engine applies the model's own FIM tokens; a model without them refuses.
    return ["infill", "prefix"]


def _ollama(model: str, setting: str) -> list[str]:
    # Ollama applies the model's FIM template when given ``suffix``; others get raw text.
    return ["suffix", "prefix"] if setting in ("auto", "suffix") and template_for(model) else ["prefix"]


DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            "siliconflow",
            _siliconflow,
            max_stops=MAX_STOP_SEQUENCES,
            chat_fim_fields=True,
            native_fim=SILICONFLOW_NATIVE_FIM,
        ),
        Dialect("openai", _openai, max_stops=MAX_STOP_SEQUENCES, logprobs=True),
        Dialect("llama-cpp-python", _openai, llama_cpp=True, grammar_phases=True, logprobs=True),
        Dialect("llama-server", _infill, honours_setting=False, infill=True, llama_cpp=True),
        Dialect("ollama", _ollama, honours_setting=False, generate=True, max_stops=MAX_STOP_SEQUENCES),
    )
}


def dialect_for(api: str) -> Dialect:
    """The dialect of wire format ``api`` (``Backend.api``); an unknown one speaks the
    plain OpenAI-compatible dialect."""
    return DIALECTS.get(api, DIALECTS[GENERIC_API])
