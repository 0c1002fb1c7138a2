"""Latency model of the simulated backend: time to first token and token pacing."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class LatencyModel:
    """How long the simulated backend takes to answer.

    Attributes:
        ttft_ms: median time to first token, in **milliseconds** (>= 0). Measured from
            the moment the request is handled to the first token event.
        ttft_jitter: sigma of a log-normal multiplier applied to ``ttft_ms``
            (dimensionless, >= 0). ``0`` gives a fixed TTFT; ``0.5`` gives a long tail
            similar to a shared cloud endpoint. The median stays ``ttft_ms``.
        tokens_per_s: decoding speed in tokens per **second** (> 0; ``math.inf``
            sends all tokens back to back).
        seed: seed of the model's own random generator (``None``: nondeterministic).
            Two models with the same parameters and seed sample the same TTFT sequence.

    Raises:
        ValueError: if a parameter is out of range.
    """

    ttft_ms: float = 400.0
    ttft_jitter: float = 0.0
    tokens_per_s: float = 50.0
    seed: int | None = 0
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (self.ttft_ms >= 0 and math.isfinite(self.ttft_ms)):
            raise ValueError(f"ttft_ms must be a finite number >= 0, got {self.ttft_ms!r}")
        if not (self.ttft_jitter >= 0 and math.isfinite(self.ttft_jitter)):
            raise ValueError(f"ttft_jitter must be a finite number >= 0, got {self.ttft_jitter!r}")
        if not self.tokens_per_s > 0:
            raise ValueError(f"tokens_per_s must be > 0, got {self.tokens_per_s!r}")
        self._rng = random.Random(self.seed)

    def sample_ttft_s(self) -> float:
        """Draw one time to first token, in **seconds** (advances the random generator)."""
        base = self.ttft_ms / 1000.0
        if self.ttft_jitter == 0:
            return base
        return base * self._rng.lognormvariate(0.0, self.ttft_jitter)

    def token_interval_s(self) -> float:
        """Time between two consecutive tokens, in **seconds** (``1 / tokens_per_s``)."""
        return 1.0 / self.tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        """The parameters as a JSON-ready dict (keys as the constructor's)."""
        data = asdict(self)
        data.pop("_rng", None)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base: LatencyModel | None = None) -> LatencyModel:
        """Build a model from a dict of constructor keys.

        Keys missing from ``data`` are taken from ``base`` (or the defaults).

        Raises:
            ValueError: on an unknown key or an out-of-range value.
        """
        known = {"ttft_ms", "ttft_jitter", "tokens_per_s", "seed"}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown latency keys: {sorted(unknown)}")
        params = base.to_dict() if base is not None else {}
        params.update(data)
        try:
            return cls(**params)
        except TypeError as exc:  # e.g. a string where a number belongs
            raise ValueError(str(exc)) from exc
