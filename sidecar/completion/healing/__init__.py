"""Token healing: back the prompt up to a token boundary and make the answer start with
what was cut off.

A prompt that ends inside a word (``clo`` | ``se(in->fd);``) or after a space
(``self.restval `` | ``= restval``) ends where the model's tokenizer would rarely put a
token boundary: tokens such as ``" close"`` or ``" ="`` carry the text on both sides of
the cursor, so the model, which never re-splits the last token, continues with a new
word (mid-word holes were 0% exact) or a second space. Healing removes the *heal* (the
partial word with the horizontal whitespace before it, or trailing horizontal
whitespace alone) from the end of the prompt and requires the model's output to start
with it; the heal is then stripped from the output before anything else sees it, so the
text the editor gets stays relative to the cursor.

One job per module:

- ``plan.py``: what is cut (:func:`split_heal`) and, per backend (:func:`plan_for`),
  whether the output is **constrained** by a grammar (``llama-cpp-python``,
  ``llama-server``), **filtered** (Ollama, SiliconFlow and other OpenAI-compatible
  servers; only words that look unfinished, :func:`looks_unfinished`), or not healed
  (``chat``);
- ``grammar.py``: the llama.cpp GBNF grammar (:func:`grammar_for`, :func:`gbnf_literal`)
  and what it costs per generated token;
- ``unheal.py``: :class:`Unhealer`, which strips the heal from the streamed output (and
  drops an output that does not start with it);
- ``phases.py``: on llama-cpp-python the constrained request only generates the heal,
  then a plain continuation goes on (:func:`stream_healed`).

``token_healing = false`` turns healing off. See docs/architecture.md.
"""

from .grammar import gbnf_literal, grammar_for
from .phases import GRAMMAR_PHASE_APIS, continuation, split_request, stream_healed
from .plan import (
    CONSTRAINED_APIS,
    FILTERED_STRATEGIES,
    MAX_SPACE_CHARS,
    MAX_WORD_CHARS,
    NO_HEALING,
    HealingPlan,
    looks_unfinished,
    plan_for,
    split_heal,
)
from .unheal import Unhealer

__all__ = [
    "CONSTRAINED_APIS",
    "FILTERED_STRATEGIES",
    "GRAMMAR_PHASE_APIS",
    "MAX_SPACE_CHARS",
    "MAX_WORD_CHARS",
    "NO_HEALING",
    "HealingPlan",
    "Unhealer",
    "continuation",
    "gbnf_literal",
    "grammar_for",
    "looks_unfinished",
    "plan_for",
    "split_heal",
    "split_request",
    "stream_healed",
]
