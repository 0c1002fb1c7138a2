"""The healing plan: what is cut off the prompt, and which backends get a grammar, a
filter or nothing.

What is cut (:func:`split_heal`): the trailing run of identifier characters
(``str.isalnum`` or ``_``, at most ``MAX_WORD_CHARS``; a longer run is not healed) with the
spaces and tabs right before it (at most ``MAX_SPACE_CHARS``, else the word alone);
without a word, the trailing spaces and tabs alone (the *whitespace-only* heal).
Indentation (whitespace that starts the line) is never cut: a prompt ending in a line's
indentation is what FIM training and every editor produce, and an indented blank line is
where multi-line suggestions start, so a grammar there would cost the most (its price is
paid per generated token) for the least gain. Nothing crosses a line break, and the
prompt is never cut to nothing.

Per backend (:func:`plan_for`):

- **constrained** (``llama-cpp-python``, ``llama-server``; every strategy they use): the
  request carries a llama.cpp GBNF ``grammar`` (:func:`.grammar.grammar_for`) that forces
  the output to start with the heal, so the engine picks tokens that span the old
  boundary (``" fibonacci"``). Both partial words and whitespace-only heals apply. On
  llama-cpp-python the grammar is only used until the heal is out (``phases.py``).
- **filtered** (Ollama, SiliconFlow and other OpenAI-compatible servers, with the
  ``suffix``, ``template`` and ``prefix`` strategies): nothing can force the output, so
  a candidate that does not start with the heal is dropped (no suggestion; counted as
  ``heal.mismatch``). Only words that look unfinished are healed there
  (:func:`looks_unfinished`: a longer identifier in the windows starts with the word,
  and the word is not itself one of them: ``x = 1|`` is left alone), never whitespace
  alone:
  after ``x = `` these models (larger, with FIM training on arbitrary character splits)
  rarely add a second space, while a filter would drop every candidate that starts
  without one (a line break, a closing bracket), so the prompt keeps its trailing
  whitespace and no candidate is lost. A partial word is worth the risk: the unhealed
  answer to ``clo`` is rarely ``se(...)``, and a dropped candidate costs one suggestion.
- ``chat`` is never healed: a chat answer starts a new message, not a token continuing
  the prompt, so there is no boundary to heal.

See docs/architecture.md.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from ..context import CompletionContext
from ..dialects import DIALECTS
from .grammar import choices_grammar, grammar_for

MAX_WORD_CHARS = 32  # a longer identifier run is left alone (minified or generated text)
MAX_SPACE_CHARS = 32  # horizontal whitespace cut with (or instead of) a word
MAX_CHOICES = 200  # member names in one grammar (more: the receiver is not constrained)
#: Wire formats whose engine takes a GBNF grammar (llama.cpp's): ``Dialect.llama_cpp``.
CONSTRAINED_APIS = frozenset(name for name, d in DIALECTS.items() if d.llama_cpp)
FILTERED_STRATEGIES = frozenset({"suffix", "template", "prefix"})
_SPACE = " \t"


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def split_heal(prefix: str, *, whitespace: bool = True) -> tuple[str, str]:
    """Split ``prefix`` (text before the cursor) into ``(prompt_prefix, heal)`` with
    ``prompt_prefix + heal == prefix`` (see the module doc for what the heal is).

    ``whitespace=False`` leaves a prefix that ends in spaces or tabs (no word after
    them) whole. ``heal`` is ``""`` when nothing is cut. Work is bounded by
    ``MAX_WORD_CHARS + MAX_SPACE_CHARS`` characters whatever the length of ``prefix``.
    """
    end = len(prefix)
    j = end
    while j > 0 and end - j <= MAX_WORD_CHARS and _is_word(prefix[j - 1]):
        j -= 1
    if end - j > MAX_WORD_CHARS:
        return prefix, ""  # the run goes on past the bound
    k = j
    while k > 0 and j - k <= MAX_SPACE_CHARS and prefix[k - 1] in _SPACE:
        k -= 1
    if j - k > MAX_SPACE_CHARS or k == 0 or prefix[k - 1] == "\n":
        k = j  # indentation (or too much whitespace) stays: the word alone
    if j == end and (not whitespace or k == j):
        return prefix, ""
    if k == 0:
        return prefix, ""  # the prompt would be empty
    return prefix[:k], prefix[k:]


@dataclass(frozen=True)
class HealingPlan:
    """How one request is healed.

    ``heal`` is the text cut off the end of the context's prefix (``""``: no healing);
    ``prompt_prefix`` is the prefix without it (the prompt's end); ``constrained`` is
    True when the engine is told to start its output with ``heal`` (a GBNF grammar),
    False when the output is only checked (:class:`.unheal.Unhealer`).
    """

    heal: str = ""
    prompt_prefix: str = ""
    constrained: bool = False
    #: Member names the output must start with (each starts with ``heal``), whole and
    #: followed by anything but an identifier character: the members the workspace index
    #: knows for the receiver at the cursor (``CompletionContext.members``). Empty: none.
    choices: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        """Whether the plan changes the request (a heal, or member choices)."""
        return bool(self.heal or self.choices)

    @property
    def extra_tokens(self) -> int:
        """Model tokens to add to ``max_tokens`` for the heal the model re-generates (an
        estimate: one per 3 characters, plus one)."""
        return len(self.heal) // 3 + 1 if self.heal else 0

    def grammar(self) -> str | None:
        """The GBNF grammar of a constrained plan (None otherwise)."""
        if not self.constrained:
            return None
        if self.choices:
            return choices_grammar(self.choices)
        return grammar_for(self.heal) if self.heal else None

    def healed_context(self, ctx: CompletionContext) -> CompletionContext:
        """``ctx`` with the heal cut off its prefix: the context the prompt is built from.
        Everything else stays, ``line_prefix`` included, so the rules that depend on the
        cursor (stop sequences, one line or several) see the cursor's line; ``ctx``
        itself (the cache key, the filters) is not changed."""
        if not self.heal:
            return ctx
        return dataclasses.replace(ctx, prefix=self.prompt_prefix)


NO_HEALING = HealingPlan()


def plan_for(ctx: CompletionContext, *, api: str, strategy: str) -> HealingPlan:
    """The healing plan for ``ctx`` sent with ``strategy`` to a backend speaking ``api``
    (``llama-cpp-python``, ``llama-server``, ``ollama``, ``siliconflow``, ``openai``);
    see the module doc for which get a grammar and which a filter."""
    constrained = api in CONSTRAINED_APIS
    if not constrained and strategy not in FILTERED_STRATEGIES:
        return NO_HEALING  # chat, or a strategy we do not know
    prompt_prefix, heal = split_heal(ctx.prefix, whitespace=constrained)
    if constrained and ctx.members and heal == heal.lstrip(_SPACE):
        # The cursor is right after a member access (``Validate.``) or in the member's
        # name (``Validate.no``): the output must start with one of the members.
        choices = tuple(sorted({m for m in ctx.members if m.startswith(heal) and m != heal}))
        if choices and len(choices) <= MAX_CHOICES:
            return HealingPlan(
                heal=heal, prompt_prefix=prompt_prefix if heal else ctx.prefix, constrained=True, choices=choices
            )
    if not heal:
        return NO_HEALING
    if not constrained and not looks_unfinished(heal.lstrip(_SPACE), ctx):
        return NO_HEALING  # a filter would drop every candidate that does not re-type it
    return HealingPlan(heal=heal, prompt_prefix=prompt_prefix, constrained=constrained)


_IDENT = re.compile(r"[^\W]+")


def looks_unfinished(word: str, ctx: CompletionContext) -> bool:
    """Whether ``word`` (the partial word at the cursor) is probably still being typed:
    a longer identifier in the windows starts with it, and it does not occur there as a
    whole identifier elsewhere. Used where healing can only filter (a candidate that does
    not re-type the word is dropped): ``x = 1|``, ``import os|`` or ``return total|``
    (a finished word) is then not healed, ``return fibo|`` with ``fibonacci`` defined is."""
    if not word:
        return False
    seen = _IDENT.findall(ctx.prefix[: len(ctx.prefix) - len(word)]) + _IDENT.findall(ctx.suffix)
    if word in seen:
        return False
    return any(len(w) > len(word) and w.startswith(word) for w in seen)
