"""The postprocessing pipeline: where a growing completion ends, and how it is cleaned.

Two kinds of rules, each in its own module (the package docstring has the list):

*Stop rules* decide where the answer ends. Each complete line (one followed by a line
break) is judged by :func:`find_end`, in this order:

1. the line policy (``line_policy.judge``): a blank line after text ends a multi-line
   answer, the first line with text ends a one-line answer (kept), too many leading
   blank lines end it empty;
2. a markdown fence (``fence``);
3. a line indented less than the cursor line: the block ended (``block_end``);
4. repetition (``repetition.repeats``): a copy of an earlier line of the answer;
5. lines after the cursor (``suffix_repeat.repeats``): a copy, exact or up to trailing
   punctuation, of one of the next lines of the document.

Rules 2 to 5 drop the line they end at; the line policy's one-line verdict keeps its
line, so it is applied after them (a first line that is a copy still goes).
:class:`StreamFilter` then tells the stream to stop, so the upstream request is closed
there. The last line, while no break follows it, is not judged but *held back* when
it is the start of a line that rules 2 to 5 would drop (each rule's ``holds``), so
what is shown while streaming never has a partial line that the final text removes.

*Text rules* then clean what is kept, in this order (:func:`clean`):

6. leading blank lines collapse to one line break (``line_policy.collapse_leading_blank``);
7. no double space at the join with the cursor line (``join_whitespace.join``);
8. indentation in the document's style, and the first line of an answer on a blank
   cursor line placed on it (``indentation.normalise``);
9. trailing whitespace trimmed (``trailing_whitespace.trim``);
10. no text that already follows the cursor (``suffix_overlap.strip_suffix_overlap``).

The collapse comes first so that the other rules see the first line with text right
after at most one break; the join rule comes before indentation so that a stray space
narrower than an indentation unit is gone before depths are measured; the trim and then
the overlap rule come last because the overlap rule compares the suggestion's final end
with the text after the cursor.

``clean`` runs the stop rules too, on the whole text (its last line counts as still
growing), so a stream's text at any moment and a cached text give the same suggestion as
the stream filter would. The price: ``clean`` cannot tell a finished stream from a
running one, so a stream that ends without a line break after a last line that is a
strict start of an earlier line or of a next line (``return`` above ``return total``)
loses that line. When the filter ends an answer itself, the text it keeps ends with a
line break, so its last line counts as complete.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..context import CompletionContext
from . import (block_end, fence, indentation, join_whitespace, line_policy, repetition, suffix_repeat,
               trailing_whitespace)
from .common import SuffixLine, following_lines
from .suffix_overlap import strip_suffix_overlap


@dataclass(frozen=True)
class Prepared:
    """What the rules read from a context once: the next lines after the cursor (stripped,
    :func:`common.following_lines`) and the document's indentation style."""

    following: tuple[SuffixLine, ...]
    style: indentation.Style | None
    fences: bool  # whether the fence rule applies


def prepare(ctx: CompletionContext) -> Prepared:
    """The :class:`Prepared` facts of ``ctx`` (cached: a stream cleans its text at every
    piece it receives)."""
    return _prepare(ctx.prefix, ctx.suffix, ctx.line_prefix, ctx.line_suffix, ctx.language)


@lru_cache(maxsize=64)
def _prepare(prefix: str, suffix: str, line_prefix: str, line_suffix: str, language: str) -> Prepared:
    ctx = CompletionContext(prefix=prefix, suffix=suffix, line_prefix=line_prefix, line_suffix=line_suffix,
                            language=language, eol="\n")
    # A blank cursor line is indentation too: the user put the cursor at that depth.
    mark = "x" if not line_prefix.strip() and not line_suffix.strip() else ""
    return Prepared(following_lines(ctx), indentation.detect(prefix + mark + suffix), fence.applies(ctx))


def find_end(lines: list[str], ctx: CompletionContext, *, multiline: bool, open_last: bool) -> int | None:
    """How many of ``lines`` (a completion split at its breaks) the answer keeps, by the
    stop rules (module doc); None when no rule ended it. With ``open_last`` the last line
    is still growing: it is kept unless it is held back (then it is not counted), and the
    result is never None."""
    prep = prepare(ctx)
    width = prep.style.width if prep.style else 4
    whole_first = not ctx.line_prefix.strip() and not ctx.mid_line
    earlier: list[str] = []
    text_seen = False
    n = len(lines)
    for i, line in enumerate(lines):
        against_suffix = i > 0 or whole_first
        ends_block = i > 0 and bool(line.strip()) and not block_end.exempt(text_seen, ctx) \
            and block_end.below(line, ctx, width)
        if open_last and i == n - 1:
            held = (prep.fences and fence.holds(line)) or ends_block \
                or (i > 0 and repetition.holds(line, earlier)) \
                or (against_suffix and suffix_repeat.holds(line, prep.following))
            return i if held else n
        verdict = line_policy.judge(i, line, text_seen, multiline=multiline, mid_line=ctx.mid_line)
        if verdict == line_policy.END_BEFORE:
            return i
        if line.strip():
            if (prep.fences and fence.is_fence(line)) or ends_block \
                    or (i > 0 and repetition.repeats(line, earlier)) \
                    or (against_suffix and suffix_repeat.repeats(line, prep.following)):
                return i
            text_seen = True
        if verdict == line_policy.END_AFTER:
            return i + 1
        # The first line counts as the whole cursor line, but only when the answer wrote
        # some of it: the user's own line is not a line of the answer.
        earlier.append(ctx.line_prefix + line if i == 0 and line.strip() else line)
    return n if open_last else None


def clean(text: str, ctx: CompletionContext, *, multiline: bool | None = None) -> str:
    """The suggestion for completion ``text`` at ``ctx``: the stop rules, then the text
    rules (module doc). ``multiline`` overrides ``ctx.multiline`` (the rest of a
    multi-line suggestion the user is typing through keeps its lines, although the
    cursor line now has text)."""
    if not text:
        return ""
    lines = text.split("\n")
    lines = lines[: find_end(lines, ctx, multiline=ctx.multiline if multiline is None else multiline, open_last=True)]
    if not lines:
        return ""
    style = prepare(ctx).style
    lines = line_policy.collapse_leading_blank(lines)
    lines = join_whitespace.join(lines, ctx, style.width if style else 4)
    lines = indentation.normalise(lines, ctx, style)
    return strip_suffix_overlap(trailing_whitespace.trim("\n".join(lines)), ctx.line_suffix)


class StreamFilter:
    """Feed text deltas with :meth:`feed`; read the cleaned result with :meth:`text`."""

    def __init__(self, ctx: CompletionContext) -> None:
        self.ctx = ctx
        self._raw = ""
        self._cut: int | None = None  # index in _raw where the completion ends
        self._breaks = 0  # line breaks in _raw when the lines were last judged

    @property
    def done(self) -> bool:
        return self._cut is not None

    @property
    def raw(self) -> str:
        return self._raw

    def feed(self, delta: str) -> bool:
        """Append ``delta``; return True once the completion is finished (stop the stream)."""
        if self._cut is not None:
            return True
        self._raw += delta
        breaks = self._raw.count("\n")
        if breaks == self._breaks:
            return False  # no new complete line: nothing to judge
        self._breaks = breaks
        lines = self._raw.split("\n")[:-1]
        keep = find_end(lines, self.ctx, multiline=self.ctx.multiline, open_last=False)
        if keep is None:
            return False
        # Keep the break after the last kept line: the text then says that line is complete.
        self._cut = sum(len(line) + 1 for line in lines[:keep])
        return True

    def raw_kept(self) -> str:
        """The raw model text up to where the completion ends (no cleaning). Once the
        filter has ended the completion, it ends with the line break after its last line
        (or is empty)."""
        return self._raw if self._cut is None else self._raw[: self._cut]

    def text(self) -> str:
        """The cleaned completion (may be empty)."""
        return clean(self.raw_kept(), self.ctx)
