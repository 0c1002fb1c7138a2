"""The postprocessing pipeline: where a growing completion ends, and how it is cleaned.

The rules live in one module each; this module holds their order, in two lists:

*Stop rules* decide where the answer ends. Each complete line (one followed by a line
break) is judged by :func:`find_end`: first the line policy (``line_policy.judge``: a
blank line after text ends a multi-line answer, the first line with text ends a one-line
answer, too many leading blank lines end it empty), then :data:`STOP_RULES` in order.
A stop rule drops the line it ends at; the line policy's one-line verdict keeps its line,
so it is applied after them (a first line that is a copy still goes). ``StreamFilter``
then tells the stream to stop, so the upstream request is closed there. The last line,
while no break follows it, is not judged but *held back* when it is the start of a line
that a stop rule would drop (each rule's ``holds``), so what is shown while streaming
never has a partial line that the final text removes.

*Text rules* (:data:`TEXT_RULES`, in order) then clean what is kept (:func:`clean`). The
collapse of leading blank lines comes first so that the other rules see the first line
with text right after at most one break; the join rule comes before indentation so that
a stray space narrower than an indentation unit is gone before depths are measured; the
trim and then the overlap rule come last because the overlap rule compares the
suggestion's final end with the text after the cursor.

``clean`` runs the stop rules too, on the whole text (its last line counts as still
growing), so a stream's text at any moment and a cached text give the same suggestion as
the stream filter would. The price: ``clean`` cannot tell a finished stream from a
running one, so a stream that ends without a line break after a last line that is a
strict start of an earlier line or of a next line (``return`` above ``return total``)
loses that line. When the filter ends an answer itself, the text it keeps ends with a
line break, so its last line counts as complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from ..context import CompletionContext
from . import (
    block_end,
    confidence,
    fence,
    indentation,
    join_whitespace,
    line_policy,
    repetition,
    suffix_copy,
    suffix_repeat,
    trailing_whitespace,
)
from .common import SuffixLine, following_lines
from .suffix_overlap import strip_suffix_overlap


@dataclass(frozen=True)
class Prepared:
    """What the rules read from a context once: the next lines after the cursor (stripped,
    :func:`common.following_lines`) and the document's indentation style."""

    following: tuple[SuffixLine, ...]
    style: indentation.Style | None
    fences: bool  # whether the fence rule applies
    below: tuple[str, ...] = ()  # the lines of the cursor's block below it (suffix_copy.block_lines)


def prepare(ctx: CompletionContext) -> Prepared:
    """The :class:`Prepared` facts of ``ctx`` (cached: a stream cleans its text at every
    piece it receives)."""
    return _prepare(ctx.prefix, ctx.suffix, ctx.line_prefix, ctx.line_suffix, ctx.language)


@lru_cache(maxsize=64)
def _prepare(prefix: str, suffix: str, line_prefix: str, line_suffix: str, language: str) -> Prepared:
    ctx = CompletionContext(
        prefix=prefix, suffix=suffix, line_prefix=line_prefix, line_suffix=line_suffix, language=language, eol="\n"
    )
    # A blank cursor line is indentation too: the user put the cursor at that depth.
    mark = "x" if not line_prefix.strip() and not line_suffix.strip() else ""
    style = indentation.detect(prefix + mark + suffix)
    below = suffix_copy.block_lines(ctx, style.width if style else 4)
    return Prepared(following_lines(ctx), style, fence.applies(ctx), below)


@dataclass(frozen=True)
class LineView:
    """One line of a growing answer as the stop rules see it."""

    index: int  # 0: the first line (it continues the cursor line)
    line: str
    earlier: list[str]  # the answer's earlier lines (the first one with the cursor line's text)
    text_seen: bool  # an earlier line had text
    ctx: CompletionContext
    prep: Prepared
    width: int  # the document's indentation unit

    @property
    def against_suffix(self) -> bool:
        """Whether the line stands for a whole line, comparable with the lines after the
        cursor (any but the first, and the first on a blank cursor line)."""
        return self.index > 0 or (not self.ctx.line_prefix.strip() and not self.ctx.mid_line)


@dataclass(frozen=True)
class StopRule:
    """``ends(view)``: the answer ends before this line (it is dropped); ``holds(view)``:
    this growing last line may still become such a line (it is not shown yet)."""

    name: str
    ends: Callable[[LineView], bool]
    holds: Callable[[LineView], bool]


def _first_copies(v: LineView, grow: bool) -> bool:
    if v.text_seen or not v.line.strip():
        return False
    full = suffix_copy.whole_line(v.index, v.line, v.ctx)
    return suffix_copy.holds(full, v.prep.below) if grow else suffix_copy.copies(full, v.prep.below)


def _block_ended(v: LineView) -> bool:
    return (
        v.index > 0
        and bool(v.line.strip())
        and not block_end.exempt(v.text_seen, v.ctx)
        and block_end.below(v.line, v.ctx, v.width)
    )


#: The stop rules after the line policy, in the order they are judged (module doc).
STOP_RULES: tuple[StopRule, ...] = (
    StopRule(
        "fence", lambda v: v.prep.fences and fence.is_fence(v.line), lambda v: v.prep.fences and fence.holds(v.line)
    ),
    StopRule("block_end", _block_ended, _block_ended),
    StopRule(
        "repetition",
        lambda v: v.index > 0 and repetition.repeats(v.line, v.earlier),
        lambda v: v.index > 0 and repetition.holds(v.line, v.earlier),
    ),
    StopRule(
        "suffix_repeat",
        lambda v: v.against_suffix and suffix_repeat.repeats(v.line, v.prep.following),
        lambda v: v.against_suffix and suffix_repeat.holds(v.line, v.prep.following),
    ),
    StopRule("suffix_copy", lambda v: _first_copies(v, False), lambda v: _first_copies(v, True)),
)


def find_end(lines: list[str], ctx: CompletionContext, *, multiline: bool, open_last: bool) -> int | None:
    """How many of ``lines`` (a completion split at its breaks) the answer keeps, by the
    line policy and :data:`STOP_RULES` (module doc); None when no rule ended it. With
    ``open_last`` the last line is still growing: it is kept unless it is held back (then
    it is not counted), and the result is never None."""
    prep = prepare(ctx)
    width = prep.style.width if prep.style else 4
    earlier: list[str] = []
    text_seen = False
    n = len(lines)
    for i, line in enumerate(lines):
        view = LineView(i, line, earlier, text_seen, ctx, prep, width)
        if open_last and i == n - 1:
            held = any(rule.holds(view) for rule in STOP_RULES)
            return i if held else n
        verdict = line_policy.judge(i, line, text_seen, multiline=multiline, mid_line=ctx.mid_line)
        if verdict == line_policy.END_BEFORE:
            return i
        if line.strip():
            if any(rule.ends(view) for rule in STOP_RULES):
                return i
            text_seen = True
        if verdict == line_policy.END_AFTER:
            return i + 1
        # The first line counts as the whole cursor line, but only when the answer wrote
        # some of it: the user's own line is not a line of the answer.
        earlier.append(ctx.line_prefix + line if i == 0 and line.strip() else line)
    return n if open_last else None


TextRule = Callable[[list[str], CompletionContext, "indentation.Style | None"], list[str]]

#: The text rules, in the order they clean what the stop rules kept (module doc).
TEXT_RULES: tuple[tuple[str, TextRule], ...] = (
    ("line_policy.collapse_leading_blank", lambda lines, ctx, style: line_policy.collapse_leading_blank(lines)),
    ("join_whitespace", lambda lines, ctx, style: join_whitespace.join(lines, ctx, style.width if style else 4)),
    ("indentation", lambda lines, ctx, style: indentation.normalise(lines, ctx, style)),
    ("trailing_whitespace", lambda lines, ctx, style: trailing_whitespace.trim("\n".join(lines)).split("\n")),
    ("suffix_overlap", lambda lines, ctx, style: strip_suffix_overlap("\n".join(lines), ctx.line_suffix).split("\n")),
)


def clean(text: str, ctx: CompletionContext, *, multiline: bool | None = None) -> str:
    """The suggestion for completion ``text`` at ``ctx``: the stop rules, then
    :data:`TEXT_RULES` (module doc). ``multiline`` overrides ``ctx.multiline`` (the rest of a
    multi-line suggestion the user is typing through keeps its lines, although the
    cursor line now has text)."""
    if not text:
        return ""
    lines = text.split("\n")
    lines = lines[: find_end(lines, ctx, multiline=ctx.multiline if multiline is None else multiline, open_last=True)]
    if not lines:
        return ""
    style = prepare(ctx).style
    for _name, rule in TEXT_RULES:
        lines = rule(lines, ctx, style)
    return "\n".join(lines)


#: Lines with text a one-line answer's stream reads past its end (the *lookahead*), for
#: the request that follows accepting it (:class:`StreamFilter`).
LOOKAHEAD_LINES = 1
#: Line breaks after the end at which the lookahead gives up (blank lines only so far).
LOOKAHEAD_MAX_BREAKS = 3


class StreamFilter:
    """Feed text deltas with :meth:`feed`; read the cleaned result with :meth:`text`.

    Where a one-line answer ends (the line policy's verdict in a one-line context) the
    stream goes on for a *lookahead* of up to ``lookahead`` more lines with text (at
    most ``LOOKAHEAD_MAX_BREAKS`` line breaks): what the model writes after the line the
    user may accept. ``done`` is True at the answer's end, so the request is answered
    then; ``feed`` says stop once the lookahead is read. :meth:`raw_kept` is the answer,
    :meth:`raw_reach` the answer and its lookahead (``InflightStream`` answers the
    request after an accept from it, typing-through, docs/architecture.md)."""

    def __init__(self, ctx: CompletionContext, cut_logprob: float | None = None, lookahead: int = 0) -> None:
        self.ctx = ctx
        #: The confidence cut's threshold (natural log; :mod:`.confidence`), None: off.
        self.cut_logprob = cut_logprob
        self.lookahead = lookahead
        self._raw = ""
        self._cut: int | None = None  # index in _raw where the completion ends
        self._ahead: int | None = None  # index in _raw where the lookahead ends (None: still reading)
        self._breaks = 0  # line breaks in _raw when the lines were last judged
        #: The stream's token log-probabilities (``StreamInfo.token_logprobs``), where the
        #: backend sent them; the stream runner shares its list here.
        self.token_logprobs: list[tuple[str, float]] = []

    @property
    def done(self) -> bool:
        return self._cut is not None

    @property
    def settled(self) -> bool:
        """The answer has ended and its lookahead is read (or none is read): every line
        of :meth:`raw_reach` is complete."""
        return self._cut is not None and self._ahead is not None

    @property
    def raw(self) -> str:
        return self._raw

    def feed(self, delta: str) -> bool:
        """Append ``delta``; return True once the completion is finished and its lookahead
        read (stop the stream)."""
        if self._cut is not None:
            if self._ahead is not None:
                return True
            self._raw += delta
            return self._read_ahead()
        self._raw += delta
        breaks = self._raw.count("\n")
        if breaks == self._breaks:
            return False  # no new complete line: nothing to judge
        self._breaks = breaks
        lines = self._raw.split("\n")[:-1]
        keep = find_end(lines, self.ctx, multiline=self.ctx.multiline, open_last=False)
        if self.cut_logprob is not None and self.token_logprobs and len(lines) > 1:
            cut = confidence.cut_at(
                lines[: keep if keep is not None else len(lines)], self.token_logprobs, self.cut_logprob, len(lines) + 1
            )
            if cut is not None:
                keep = cut
        if keep is None:
            return False
        # Keep the break after the last kept line: the text then says that line is complete.
        self._cut = sum(len(line) + 1 for line in lines[:keep])
        if (
            self.lookahead <= 0
            or self.ctx.multiline
            or self.ctx.mid_line
            or not any(line.strip() for line in lines[:keep])
            or (keep < len(lines) and not self._one_line_end(lines, keep))
        ):
            self._ahead = self._cut
            return True
        return self._read_ahead()

    def _one_line_end(self, lines: list[str], keep: int) -> bool:
        """Whether the answer ended at ``keep`` by the one-line verdict alone: a stop rule
        would also have ended it at the next line (then the model's next line is no
        lookahead worth reading: a repeat, a copy, the block's end)."""
        nxt = lines[keep]
        if not nxt.strip():
            return True
        prep = prepare(self.ctx)
        view = LineView(
            keep,
            nxt,
            [self.ctx.line_prefix + ln if i == 0 else ln for i, ln in enumerate(lines[:keep])],
            True,
            self.ctx,
            prep,
            prep.style.width if prep.style else 4,
        )
        return not any(rule.ends(view) for rule in STOP_RULES)

    def _read_ahead(self) -> bool:
        """Judge the lookahead so far (class doc); True once it is read."""
        assert self._cut is not None
        after = self._raw[self._cut :]
        done_lines = after.split("\n")[:-1]
        with_text = [i for i, line in enumerate(done_lines) if line.strip()]
        if len(with_text) >= self.lookahead:
            self._ahead = self._cut + sum(len(line) + 1 for line in done_lines[: with_text[self.lookahead - 1] + 1])
        elif len(done_lines) >= LOOKAHEAD_MAX_BREAKS:
            self._ahead = self._cut
        else:
            return False
        return True

    def raw_reach(self) -> str:
        """The raw model text up to the end of the lookahead (class doc): the answer
        (``raw_kept``) and what the model wrote after it; while the answer is still
        growing, all the raw text."""
        if self._cut is None:
            return self._raw
        return self._raw if self._ahead is None else self._raw[: self._ahead]

    def raw_kept(self) -> str:
        """The raw model text up to where the completion ends (no cleaning). Once the
        filter has ended the completion, it ends with the line break after its last line
        (or is empty)."""
        return self._raw if self._cut is None else self._raw[: self._cut]

    def text(self) -> str:
        """The cleaned completion (may be empty)."""
        return clean(self.raw_kept(), self.ctx)
