"""The simulated model's answers: the file's true continuation, sometimes a wrong one.

The simulated backend calls :meth:`Oracle.respond` with each request body. The prompt
is a window of the document ending at the cursor, and the document before the cursor is
always the true file up to the cursor (the typist only types, or accepts, true text), so
the prompt is found verbatim in the true file and its end is the cursor.

The answer is the true text from the cursor: the rest of the cursor's line, and then up
to two more lines (1 to 3 lines in all, seeded by position); when the cursor is at the
end of a line, the answer starts with its line break. The backend applies the request's
stop sequences (``\\n`` on a single-line context, ``\\n\\n`` on a multi-line one) and
``max_tokens``, as a real model would stop. The answer never runs past the end of the
typed region (the document already holds the text after it).

With probability ``wrong_rate`` (seeded by file and cursor position, so the same place
gets the same answer in both runs of a benchmark) the answer is plausible but wrong: in
its first line that has an identifier, one identifier is swapped for another identifier
of the file (an answer without identifiers stays right, so the effective rate is a
little lower).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIM_PREFIX = re.compile(r"<\|fim_prefix\|>|<fim_prefix>|<PRE> ?")
_FIM_SUFFIX = re.compile(r"<\|fim_suffix\|>|<fim_suffix>| ?<SUF>")


@dataclass(frozen=True)
class TrueFile:
    """A file being typed: its true text and the region ``[start, end)`` being typed."""

    name: str
    text: str
    start: int
    end: int

    def to_dict(self) -> dict:
        return {"name": self.name, "text": self.text, "start": self.start, "end": self.end}


def request_prefix(body: dict) -> str | None:
    """The text before the cursor that a request body carries, for the prompt strategies
    the sidecar uses (native FIM ``prompt``/``suffix``, a FIM template, chat with
    SiliconFlow's ``prefix`` field, or a plain prefix prompt)."""
    if isinstance(body.get("prefix"), str):
        return body["prefix"]
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        m = _FIM_PREFIX.search(prompt)
        if m:
            rest = prompt[m.end() :]
            s = _FIM_SUFFIX.search(rest)
            return rest[: s.start()] if s else rest
        return prompt
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        content = messages[-1].get("content") if isinstance(messages[-1], dict) else None
        if isinstance(content, str) and "<CURSOR>" in content:
            before = content.split("<CURSOR>", 1)[0]
            return before.split("\n\n", 1)[1] if before.startswith("Language:") else before
    return None


class Oracle:
    """Knows the true files; answers a request body with the text a model would produce."""

    def __init__(self, files: list[TrueFile], seed: int = 0, wrong_rate: float = 0.25) -> None:
        if not 0 <= wrong_rate <= 1:
            raise ValueError("wrong_rate must be in [0, 1]")
        self.files = files
        self.seed = seed
        self.wrong_rate = wrong_rate
        self._vocab = {f.name: sorted({w for w in _IDENT.findall(f.text) if len(w) >= 3}) for f in files}
        self.misses = 0  # requests whose prompt matched no file

    def locate(self, prefix: str) -> tuple[TrueFile, int] | None:
        """The file and true cursor offset whose text before the cursor ends with
        ``prefix``, the cursor lying in the typed region (or None)."""
        if not prefix:
            return None
        for f in self.files:
            at = f.text.find(prefix)
            while at >= 0:
                cursor = at + len(prefix)
                if f.start <= cursor <= f.end:
                    return f, cursor
                at = f.text.find(prefix, at + 1)
        return None

    def true_continuation(self, f: TrueFile, cursor: int) -> str:
        """1 to 3 true lines from ``cursor`` (see module doc), never past the region."""
        rest = f.text[cursor : f.end]
        lines = rest.split("\n")
        n = random.Random(f"sidecar-bench:{self.seed}:{f.name}:{cursor}:lines").randint(1, 3)
        if lines and lines[0] == "":
            n += 1  # at the end of a line: its line break, then the next lines
        return "\n".join(lines[:n])

    def is_wrong(self, f: TrueFile, cursor: int) -> bool:
        return random.Random(f"sidecar-bench:{self.seed}:{f.name}:{cursor}:wrong").random() < self.wrong_rate

    def wrong_continuation(self, f: TrueFile, cursor: int, right: str) -> str:
        """A plausible mistake near ``right``: the first line with an identifier gets one
        of its identifiers swapped for another identifier of the file. Text without
        identifiers (a lone ``):``) is returned unchanged."""
        rng = random.Random(f"sidecar-bench:{self.seed}:{f.name}:{cursor}:mutate")
        vocab = self._vocab.get(f.name) or []
        lines = right.split("\n")
        for i, line in enumerate(lines):
            words = [m for m in _IDENT.finditer(line) if len(m.group()) >= 2]
            if not words:
                continue
            m = rng.choice(words)
            choices = [w for w in vocab if w != m.group() and not w.startswith(m.group())]
            if not choices:
                return right
            lines[i] = line[: m.start()] + rng.choice(choices) + line[m.end() :]
            return "\n".join(lines)
        return right

    def answer(self, prefix: str) -> str:
        """The model output for a request whose text before the cursor is ``prefix``."""
        found = self.locate(prefix)
        if found is None:
            self.misses += 1
            return ""
        f, cursor = found
        right = self.true_continuation(f, cursor)
        if right.strip() and self.is_wrong(f, cursor):
            return self.wrong_continuation(f, cursor, right)
        return right

    def respond(self, body: dict) -> str:
        """The simulated backend's ``responder``."""
        prefix = request_prefix(body)
        return "" if prefix is None else self.answer(prefix)
