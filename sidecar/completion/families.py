"""Model families as data: each FIM-trained family's special tokens, end-of-text stops
and, where it has one, its multi-file (repository) format. Which family a model belongs
to is found from its name (:func:`template_for`). The exact strings come from each
family's tokenizer (docs/architecture.md, "Facts we checked")."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class FimTemplate:
    """One family's FIM prompt: ``render(prefix, suffix)`` in its token order, ``stops``
    (its end-of-text tokens), and ``repo_format``: whether other files go in the family's
    own repository format (``<|repo_name|>``, ``<|file_sep|>``: ``snippets.repo_block``)
    instead of a comment block before the prefix."""

    family: str
    pattern: re.Pattern[str]
    prefix_tok: str
    suffix_tok: str
    middle_tok: str
    stops: tuple[str, ...]
    suffix_first: bool = False
    repo_format: bool = False

    def render(self, prefix: str, suffix: str) -> str:
        if self.suffix_first:  # Codestral / Mistral: [SUFFIX]S[PREFIX]P
            return f"{self.suffix_tok}{suffix}{self.prefix_tok}{prefix}"
        return f"{self.prefix_tok}{prefix}{self.suffix_tok}{suffix}{self.middle_tok}"


TEMPLATES: tuple[FimTemplate, ...] = (
    FimTemplate(
        "qwen-coder",
        re.compile(r"qwen.*coder|coder.*qwen", re.I),
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|endoftext|>", "<|fim_pad|>", "<|file_sep|>", "<|repo_name|>"),
        repo_format=True,
    ),
    FimTemplate(
        "deepseek-coder",
        re.compile(r"deepseek.*coder", re.I),
        "<｜fim▁begin｜>",
        "<｜fim▁hole｜>",
        "<｜fim▁end｜>",
        ("<｜end▁of▁sentence｜>",),
    ),
    FimTemplate(
        "starcoder",
        re.compile(r"starcoder|santacoder", re.I),
        "<fim_prefix>",
        "<fim_suffix>",
        "<fim_middle>",
        ("<|endoftext|>", "<file_sep>"),
    ),
    FimTemplate("codellama", re.compile(r"code-?llama", re.I), "<PRE> ", " <SUF>", " <MID>", ("<EOT>",)),
    FimTemplate("codestral", re.compile(r"codestral", re.I), "[PREFIX]", "[SUFFIX]", "", ("</s>",), suffix_first=True),
    FimTemplate(
        "codegemma",
        re.compile(r"codegemma", re.I),
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        ("<|file_separator|>", "<end_of_turn>"),
    ),
)


def template_for(model: str) -> FimTemplate | None:
    """The FIM template of ``model``'s family, or None when the family is unknown."""
    for t in TEMPLATES:
        if t.pattern.search(model):
            return t
    return None
