"""The confidence gate: before a suggestion is shown, a small logistic model estimates
how likely the user is to take it; below ``gate_threshold`` the request is answered with
nothing (and nothing is speculated on it). The model learns on the user's machine from
what the user does with what was shown, and is kept in the cache file, never sent.

Features of a suggestion (:func:`features`; a few dozen weights in all):

- the hole's kind: mid-word, mid-line, end of line, blank line (:func:`hole_kind`);
- where the text came from: a fresh stream, the cache or a prefetch, typing-through;
- the document's language (the common ones; the rest share one weight);
- the first line's length in characters (``log1p``) and how many lines follow;
- whether the stream was still running when the request was answered (the model went
  on past its first line instead of joining the text after the cursor; at blank lines
  on the quality fixtures such suggestions had no right character 14 times in 26,
  against 3 in 12 for those that had ended);
- token log-probabilities of the first line (mean and minimum, natural log, one slope
  per hole kind) where the backend returned them (the managed engine, vLLM, SGLang and
  other OpenAI-compatible servers); a flag says whether it did. On the quality benchmark
  these are what separates: without them the fitted weights hold back almost nothing.

Labels (:class:`Gate.learn`, given by ``completion/acceptance.py``) mean what the fit's
label means, "some of it was right" (at least one character the user kept): an accept is
1, and so is typing the suggestion's first line out by hand, or typing its start and then
going on differently; a suggestion the user passed over without typing any of it is 0,
but only if it was on screen at least ``gate_seen_ms`` (400 ms by default): one typed over
sooner, between two keys, was not read, and teaches nothing (counted as
``gate.unseen``). Before both rules a typing session taught the gate a reject for nearly
every suggestion passed over between keys, and within minutes it held back the right
ones too (docs/benchmarks.md, "Confidence gate"). One stochastic-gradient step
per label (learning rate ``LEARNING_RATE``, a little L2 pull towards the default
weights), so a run of rejects of one kind lowers that kind's estimate, which works as a
higher bar for that kind, and accepts raise it again.

The default weights come from the quality benchmark (``python -m devtools.bench.gate_fit``
on quality runs; docs/benchmarks.md, "Confidence gate"); ``sidecar.clearCache`` returns
to them. A suggestion asked for again at the very place where it is on screen (an editor
fetching the rest of a streamed suggestion) is not judged again: the gate decided when it
was shown (``scheduler.py``; ``gate.reshown`` counts them). Counters: ``gate.shown``,
``gate.held_back``, ``gate.accepted``, ``gate.rejected``. See docs/architecture.md, "The confidence gate".
"""

from __future__ import annotations

import json
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..config.fitted import DEFAULT_SEEN_MS, DEFAULT_THRESHOLD

log = logging.getLogger(__name__)

KINDS = ("mid_word", "mid_line", "end_of_line", "blank_line")
#: Where a suggestion came from, folded from ``Answer.source``. A fresh stream is the
#: baseline (no weight of its own: the benchmark's answers are all fresh, and a weight
#: fitted there alone would count against re-shown and cached suggestions).
ORIGINS = ("stream", "stored", "typed")
LANGUAGES = ("python", "javascript", "typescript", "c", "cpp", "go", "rust", "java")
FEATURE_NAMES = (
    ("bias",)
    + tuple(f"kind={k}" for k in KINDS)
    + tuple(f"origin={o}" for o in ORIGINS[1:])
    + tuple(f"lang={lang}" for lang in LANGUAGES)
    + ("lang=other", "first_line_chars", "more_lines", "open", "has_logprobs")
    + tuple(f"mean_logprob@{k}" for k in KINDS)
    + tuple(f"min_logprob@{k}" for k in KINDS)
    + tuple(f"first_logprob@{k}" for k in KINDS)
)
#: Format of the stored model (``gate`` row of the cache file); another is ignored.
STATE_VERSION = 5
LEARNING_RATE = 0.05
#: Per-feature share of the learning rate: the hole kind's and the log-probabilities'
#: weights learn fastest (the most telling features), so a run of rejects of one kind
#: raises the bar for that kind more than for the others, and unsure suggestions that
#: are passed over teach the model to hold back unsure ones.
RATE_SHARE = tuple(1.0 if n.startswith("kind=") or "_logprob" in n else 0.3 for n in FEATURE_NAMES)
#: Pull of each step towards the default weights (keeps one odd session from running off).
L2 = 0.01
#: How many of the last decisions ``sidecar.stats`` lists (``gate.recent``).
RECENT = 16

#: Default weights (``FEATURE_NAMES`` order), fitted by ``python -m devtools.bench.gate_fit``
#: on the real-code corpus's TUNING half (``quality --corpus tune``: 7 packages, 19 files,
#: 160 holes, Qwen2.5-Coder-0.5B on the managed engine, everything shown with
#: ``--set gate_enabled=true --set gate_threshold=0``, token log-probabilities included).
#: Language weights are left at zero (the split is by package; a language weight would
#: learn the tuning packages' style; the online model learns one per user). The threshold
#: is the one that removed the most shown-and-wrong suggestions on the tuning half while
#: accepted characters per hole fell at most 5 % (there: 41 -> 21, 7.84 -> 7.61). Applied
#: unchanged to the REPORTING half (7 other packages, 160 holes): shown-and-wrong 33 -> 12
#: (-64 %), accepted characters per hole 9.62 -> 8.92 (-7.3 %). docs/benchmarks.md,
#: "Confidence gate".
DEFAULT_WEIGHTS: tuple[float, ...] = (
    0.82,  # bias
    1.10,
    -0.55,
    0.90,
    -0.62,  # kind: mid-word, mid-line, end of line, blank line
    0.0,
    0.0,  # origin: stored, typed (a fresh stream: the baseline)
    0.00,
    0.00,
    0.00,
    0.00,
    0.00,
    0.00,
    0.00,
    0.00,
    0.00,  # language (not fitted: see above)
    0.37,
    0.00,
    -0.30,  # first line length, more lines, open stream
    0.50,  # log-probabilities given
    0.34,
    0.66,
    -0.09,
    0.45,  # mean log-probability, per kind
    0.06,
    0.46,
    -0.02,
    0.40,  # minimum log-probability, per kind
    -0.01,
    0.57,
    0.06,
    0.44,  # first token's log-probability, per kind
)
#: The largest weight a stored model may hold, either way: the defaults are under 2 and
#: the L2 pull keeps learned ones near them; a stored one beyond it is a broken file.
MAX_WEIGHT = 100.0


def hole_kind(line_prefix: str, line_suffix: str) -> str:
    """The kind of hole at a cursor between ``line_prefix`` and ``line_suffix`` (the
    cursor line's text before and after it): ``blank_line`` (only whitespace on the
    line), ``mid_line`` (code after the cursor), ``mid_word`` (the cursor ends a word),
    else ``end_of_line``."""
    if not line_prefix.strip() and not line_suffix.strip():
        return "blank_line"
    if line_suffix.strip():
        return "mid_line"
    if line_prefix[-1:].isalnum() or line_prefix[-1:] == "_":
        return "mid_word"
    return "end_of_line"


def origin_of(source: str) -> str:
    """``Answer.source`` folded into ``ORIGINS``."""
    if source in ("typed_through", "reshown", "joined"):
        return "typed"
    if source.startswith("cache") or source == "prefetch":
        return "stored"
    return "stream"


@dataclass(frozen=True)
class Features:
    """What the gate knows of one suggestion."""

    kind: str
    origin: str
    language: str
    first_line_chars: int
    more_lines: int
    open: bool = False  # the stream still ran when the request was answered
    mean_logprob: float | None = None  # natural log, per token of the first line
    min_logprob: float | None = None
    #: The first token with visible text: the model's choice of how to go on (at mid-line
    #: holes it tells right from wrong better than the mean: AUC 0.76 against 0.58 on 99
    #: suggestions of the 0.5B).
    first_logprob: float | None = None
    #: The first line's token log-probabilities themselves (at most 32, 3 decimals), for
    #: ``gate.recent`` and the benchmark's fit; not an input of the model.
    line_logprobs: tuple[float, ...] = ()

    def vector(self) -> list[float]:
        """The model's input, in ``FEATURE_NAMES`` order."""
        lang = self.language if self.language in LANGUAGES else "other"
        has = self.mean_logprob is not None and self.min_logprob is not None
        mean = self.mean_logprob if self.mean_logprob is not None else 0.0
        least = self.min_logprob if self.min_logprob is not None else 0.0
        return (
            [1.0]
            + [1.0 if self.kind == k else 0.0 for k in KINDS]
            + [1.0 if self.origin == o else 0.0 for o in ORIGINS[1:]]  # a fresh stream: none
            + [1.0 if lang == x else 0.0 for x in (*LANGUAGES, "other")]
            + [
                math.log1p(self.first_line_chars) / 4,
                math.log1p(self.more_lines),
                1.0 if self.open else 0.0,
                1.0 if has else 0.0,
            ]
            # One slope per hole kind: how sure the model must be differs by kind (a
            # mid-word completion is right when sure; at a blank line a sure guess
            # is still often another line than the user's).
            + [max(-5.0, mean) if has and self.kind == k else 0.0 for k in KINDS]
            + [max(-10.0, least) / 2 if has and self.kind == k else 0.0 for k in KINDS]
            + [
                max(-10.0, self.first_logprob) / 2 if has and self.first_logprob is not None and self.kind == k else 0.0
                for k in KINDS
            ]
        )


def first_line_logprobs(tokens: Sequence[tuple[str, float]]) -> list[float]:
    """The log-probabilities of the tokens that wrote the first line: up to the first
    line break after some text (leading line breaks and blanks belong to it)."""
    out: list[float] = []
    seen = False
    for tok, lp in tokens:
        if not isinstance(lp, (int, float)) or not math.isfinite(lp):
            continue
        if seen and "\n" in tok:
            before = tok.split("\n", 1)[0]
            if before.strip():
                out.append(float(lp))
            break
        out.append(float(lp))
        seen = seen or bool(tok.strip())
    return out


def features(
    text: str,
    kind: str,
    source: str,
    language: str,
    logprobs: Sequence[tuple[str, float]] | None = None,
    open_stream: bool = False,
) -> Features:
    """The features of suggestion ``text`` (``\n`` line breaks; a leading line break
    belongs to the first line) at a hole of ``kind``. ``logprobs``: ``(token, natural
    log-probability)`` of the stream's tokens, when the backend sent them; ``open_stream``:
    the stream was still running."""
    body = text[1:] if text.startswith("\n") else text
    first, _, rest = body.partition("\n")
    lps = first_line_logprobs(logprobs or ())
    first_lp = (
        next(
            (
                float(lp)
                for tok, lp in (logprobs or ())
                if tok.strip() and isinstance(lp, (int, float)) and math.isfinite(lp)
            ),
            None,
        )
        if lps
        else None
    )
    return Features(
        kind=kind,
        origin=origin_of(source),
        language=language.lower(),
        first_line_chars=len(first.strip()),
        more_lines=rest.count("\n") + (1 if rest else 0),
        open=open_stream,
        mean_logprob=sum(lps) / len(lps) if lps else None,
        min_logprob=min(lps) if lps else None,
        first_logprob=first_lp,
        line_logprobs=tuple(round(v, 3) for v in lps[:32]),
    )


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1 / (1 + math.exp(-z))
    e = math.exp(z)
    return e / (1 + e)


class GateModel:
    """Logistic regression over ``Features.vector()``."""

    def __init__(self, weights: Sequence[float] = DEFAULT_WEIGHTS) -> None:
        if len(weights) != len(FEATURE_NAMES):
            raise ValueError(f"{len(weights)} weights for {len(FEATURE_NAMES)} features")
        self.weights = [float(w) for w in weights]
        self.updates = 0

    def p_accept(self, f: Features) -> float:
        """Estimated probability (0..1) that the user takes the suggestion."""
        return _sigmoid(sum(w * x for w, x in zip(self.weights, f.vector())))

    def learn(self, f: Features, accepted: bool, lr: float = LEARNING_RATE) -> None:
        """One gradient step on the log-loss of ``f`` labelled ``accepted``."""
        x = f.vector()
        err = (1.0 if accepted else 0.0) - self.p_accept(f)
        new = [
            w + lr * RATE_SHARE[i] * (err * xi - L2 * (w - DEFAULT_WEIGHTS[i]))
            for i, (w, xi) in enumerate(zip(self.weights, x))
        ]
        if not all(math.isfinite(w) and abs(w) <= MAX_WEIGHT for w in new):
            log.warning("gate: a learning step gave weights that are not finite or out of range; skipped it")
            return
        self.weights = new
        self.updates += 1

    def to_json(self) -> str:
        """The stored form (strict JSON: a weight that is not finite is never written,
        :meth:`learn` keeps them finite)."""
        return json.dumps(
            {
                "version": STATE_VERSION,
                "features": list(FEATURE_NAMES),
                "weights": self.weights,
                "updates": self.updates,
            },
            allow_nan=False,
        )

    @classmethod
    def from_json(cls, text: str) -> GateModel | None:
        """The stored model, or None when it is not one of this version and features, or
        not a usable one (:meth:`parse` says why)."""
        return cls.parse(text)[0]

    @classmethod
    def parse(cls, text: str) -> tuple[GateModel | None, str | None]:
        """``(model, None)`` for a usable stored model; ``(None, None)`` for one of
        another version or feature list (an upgrade: not a fault); ``(None, why)`` for a
        broken one: not JSON, not an object, weights of the wrong number or type, a
        weight that is not finite or beyond ``MAX_WEIGHT``, a bad update count."""
        try:
            d = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            return None, f"not JSON ({exc})"
        if not isinstance(d, dict):
            return None, f"not a JSON object (a JSON {type(d).__name__})"
        if d.get("version") != STATE_VERSION or d.get("features") != list(FEATURE_NAMES):
            return None, None
        weights = d.get("weights")
        if not isinstance(weights, list) or len(weights) != len(FEATURE_NAMES):
            n = len(weights) if isinstance(weights, list) else type(weights).__name__
            return None, f"{n} weights for {len(FEATURE_NAMES)} features"
        for name, w in zip(FEATURE_NAMES, weights):
            if isinstance(w, bool) or not isinstance(w, (int, float)):
                return None, f"the weight of {name} is not a number ({w!r:.40})"
            if not math.isfinite(w):
                return None, f"the weight of {name} is not a finite number ({w})"
            if abs(w) > MAX_WEIGHT:
                return None, f"the weight of {name} is out of range ({w:g}; at most {MAX_WEIGHT:g} either way)"
        updates = d.get("updates", 0)
        if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
            return None, f"the count of updates is not a whole number of at least 0 ({updates!r:.40})"
        m = cls(weights)
        m.updates = updates
        return m, None


#: ``(load, save)`` of the model's stored JSON (the cache file's ``gate`` row).
Load = Callable[[], Awaitable[str | None]]
Save = Callable[[str], Awaitable[None]]


class Gate:
    """The gate of one session: decide, learn, remember (module doc)."""

    def __init__(
        self,
        metrics: Any,
        *,
        enabled: bool = True,
        threshold: float = DEFAULT_THRESHOLD,
        seen_ms: int = DEFAULT_SEEN_MS,
        load: Load | None = None,
        save: Save | None = None,
    ) -> None:
        self.metrics = metrics
        self.enabled = enabled
        self.threshold = threshold
        #: How long (ms) a suggestion must have been on screen for passing it over to count
        #: as a reject (module doc, "Labels").
        self.seen_ms = seen_ms
        self.model = GateModel()
        self._load, self._save = load, save
        self._dirty = False
        #: The last decisions, newest last (``summary()["recent"]``).
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT)
        #: Called after each label (the service stores the model then).
        self.on_learned: Callable[[], None] | None = None

    async def restore(self) -> None:
        """Take the stored model, if there is one of this format."""
        if self._load is None:
            return
        try:
            text = await self._load()
        except Exception:  # noqa: BLE001 - the cache file may be off or broken
            log.debug("gate: no stored model", exc_info=True)
            return
        if not text:
            return
        m, why = GateModel.parse(text)
        if m is not None:
            self.model = m
        elif why is not None:
            # Written back at the next label (``persist``); until then the defaults.
            log.warning("gate: the stored model in the cache file is unusable (%s); using the default weights", why)

    async def persist(self) -> None:
        """Store the model if it learned since the last time."""
        if not self._dirty or self._save is None:
            return
        self._dirty = False
        try:
            await self._save(self.model.to_json())
        except Exception:  # noqa: BLE001
            log.debug("gate: storing the model failed", exc_info=True)

    def reset(self) -> None:
        """Back to the default weights (``sidecar.clearCache``)."""
        self.model = GateModel()
        self._dirty = False

    @staticmethod
    def features_of(
        ctx: Any, text: str, source: str, logprobs: Sequence[tuple[str, float]] | None = None, open_stream: bool = False
    ) -> Features:
        """The features of answer ``text`` (from ``source``) for a request at ``ctx``
        (a ``CompletionContext``)."""
        return features(text, hole_kind(ctx.line_prefix, ctx.line_suffix), source, ctx.language, logprobs, open_stream)

    def admit(self, f: Features, where: str = "") -> bool:
        """Show a suggestion with features ``f``? Counts ``gate.shown`` / ``gate.held_back``
        and keeps the decision in ``recent`` (``where``: the document URI and the cursor
        as ``uri:line:column``, 0-based, the column in code points, for the user's "why was it held back")."""
        if not self.enabled:
            return True
        if f.mean_logprob is None and f.origin == "stream":
            # A fresh stream without token log-probabilities: the backend sends none, and
            # text features alone do not tell right from wrong, so it is shown. (A stored
            # or typed-through suggestion is judged as before: its stream may have had
            # them, and a suggestion held back once is not shown from the cache.)
            self.metrics.count("gate.unjudged")
            return True
        p = self.model.p_accept(f)
        self.recent.append({"where": where, **asdict(f), "p_accept": round(p, 4), "shown": p >= self.threshold})
        if p < self.threshold:
            self.metrics.count("gate.held_back")
            self.metrics.count(f"gate.held_back.{f.kind}")
            return False
        self.metrics.count("gate.shown")
        return True

    def unseen(self) -> None:
        """A suggestion was passed over before it could be read: no label (module doc)."""
        self.metrics.count("gate.unseen")

    def learn(self, f: Features, accepted: bool) -> None:
        """What the user did with a suggestion that was shown (module doc, "Labels")."""
        self.metrics.count("gate.accepted" if accepted else "gate.rejected")
        self.model.learn(f, accepted)
        self._dirty = True
        if self.on_learned is not None:
            self.on_learned()

    def summary(self) -> dict[str, Any]:
        """The ``gate`` part of ``sidecar.stats``: the setting, the counters, per hole
        kind the estimate for a typical fresh 30-character one-line suggestion in an
        unlisted language without log-probabilities, and ``recent``: the last ``RECENT``
        decisions, newest last (``where``, the features, ``p_accept``, ``shown``)."""
        c = self.metrics.snapshot()["counters"]
        return {
            "enabled": self.enabled,
            "threshold": self.threshold,
            "updates": self.model.updates,
            "shown": c.get("gate.shown", 0),
            "held_back": c.get("gate.held_back", 0),
            "unjudged": c.get("gate.unjudged", 0),
            "accepted": c.get("gate.accepted", 0),
            "rejected": c.get("gate.rejected", 0),
            "unseen": c.get("gate.unseen", 0),
            "reshown": c.get("gate.reshown", 0),
            "seen_ms": self.seen_ms,
            "p_accept": {k: round(self.model.p_accept(Features(k, "stream", "", 30, 0)), 4) for k in KINDS},
            "recent": list(self.recent),
        }
