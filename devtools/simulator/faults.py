"""Faults the simulated backend can inject into its answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

JsonBody = dict | list | str | None

#: Paths a fault applies to when it names none: the generating endpoints (OpenAI's two,
#: llama-server's ``/infill`` and Ollama's ``/api/generate``).
COMPLETION_PATHS: tuple[str, ...] = ("/v1/completions", "/v1/chat/completions", "/infill", "/api/generate")

FAULT_KINDS = ("status", "stall", "cut", "malformed", "silent", "drip")

_RATE_LIMIT_MESSAGE = (
    "Request was rejected due to rate limiting. Details: {} limit reached. "
    "If you want more, please contact contact@siliconflow.cn"
)

#: SiliconFlow's error answers as ``name -> (HTTP status, body)``. A ``str`` body is sent
#: as ``text/plain``; a dict as JSON. Codes other than 20012 and 50505 are plausible
#: stand-ins, not documented values.
SILICONFLOW_ERRORS: dict[str, tuple[int, JsonBody]] = {
    "bad_key": (401, "Invalid token"),
    "model_not_found": (
        400,
        {"code": 20012, "message": "Model does not exist. Please check it carefully.", "data": None},
    ),
    "rate_limit_rpm": (429, {"code": 50603, "message": _RATE_LIMIT_MESSAGE.format("RPM"), "data": None}),
    "rate_limit_tpm": (429, {"code": 50603, "message": _RATE_LIMIT_MESSAGE.format("TPM"), "data": None}),
    "overloaded": (
        503,
        {"code": 50505, "message": "Model service overloaded. Please try again later.", "data": None},
    ),
    "unknown": (500, {"code": 50500, "message": "Internal error", "data": None}),
}


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour. Build it with the class methods, not the constructor.

    Attributes:
        kind: ``"status"``, ``"stall"``, ``"cut"`` or ``"malformed"``.
        after_tokens: for stream faults, how many token events are sent before the fault
            acts (the fault acts just before token number ``after_tokens`` would be sent).
        status_code: HTTP status of a ``"status"`` fault.
        body: body of a ``"status"`` fault: dict/list -> JSON, str -> ``text/plain``.
        keepalive_s: for ``"stall"``: if set, a ``: keep-alive`` SSE comment is sent
            every ``keepalive_s`` **seconds** while stalled (a stream that is alive but
            produces no tokens); ``None`` sends nothing at all.
        paths: request paths the fault applies to; ``None`` means
            :data:`COMPLETION_PATHS`. See :meth:`on`.
        headers: extra response headers of a ``"status"`` fault, as ``((name, value),
            ...)``, e.g. ``(("Retry-After", "12"),)`` (see :meth:`with_headers`,
            :meth:`rate_limited`).

    On the NDJSON stream of ``/api/generate``, ``malformed`` writes the line ``{not json``
    and a stall writes no keep-alives (the format has none).

    On a non-streaming request, ``stall`` holds the answer back until the client goes
    away, ``cut`` sends half of the JSON body and closes the connection, and
    ``malformed`` answers 200 with a body that is not JSON; ``after_tokens`` is ignored.
    """

    kind: str
    after_tokens: int = 0
    status_code: int | None = None
    body: JsonBody = None
    keepalive_s: float | None = None
    paths: tuple[str, ...] | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {FAULT_KINDS}")
        if self.after_tokens < 0:
            raise ValueError("after_tokens must be >= 0")
        if self.kind == "status" and (self.status_code is None or not 100 <= self.status_code <= 599):
            raise ValueError(f"a status fault needs an HTTP status code, got {self.status_code!r}")
        if self.keepalive_s is not None and not self.keepalive_s > 0:
            raise ValueError("keepalive_s must be > 0 seconds or None")

    # -- constructors ---------------------------------------------------------------

    @classmethod
    def status(cls, code: int, body: JsonBody = None) -> Fault:
        """Answer with HTTP ``code`` and ``body`` at once (no stream, no latency).

        ``body``: dict -> JSON, str -> ``text/plain``; ``None`` -> a SiliconFlow-shaped
        JSON body ``{"code": code, "message": "HTTP <code>", "data": null}``.
        """
        if body is None:
            body = {"code": code, "message": f"HTTP {code}", "data": None}
        return cls(kind="status", status_code=code, body=body)

    @classmethod
    def stall(cls, after_tokens: int = 0, keepalive_s: float | None = None) -> Fault:
        """Send ``after_tokens`` tokens, then nothing more until the client disconnects.

        The connection stays open. ``keepalive_s`` (seconds) optionally trickles SSE
        comments during the stall.
        """
        return cls(kind="stall", after_tokens=after_tokens, keepalive_s=keepalive_s)

    @classmethod
    def silent(cls) -> Fault:
        """Read the request and send nothing at all (no status line, no headers) until the
        client disconnects: a server or network that hangs before answering."""
        return cls(kind="silent")

    @classmethod
    def drip(cls, byte_s: float = 1.0) -> Fault:
        """Send a whole streamed answer one byte every ``byte_s`` **seconds**, the status
        line and headers included, until the client disconnects (a connection that is
        alive but hopelessly slow)."""
        return cls(kind="drip", keepalive_s=byte_s)

    @classmethod
    def cut(cls, after_tokens: int) -> Fault:
        """Send ``after_tokens`` tokens, then close the connection mid-body (no ``[DONE]``).

        The chunked body is left incomplete, so an HTTP client reports a protocol error.
        """
        return cls(kind="cut", after_tokens=after_tokens)

    @classmethod
    def malformed(cls, after_tokens: int) -> Fault:
        """Send ``after_tokens`` tokens, then one event ``data: {not json``, then go on normally."""
        return cls(kind="malformed", after_tokens=after_tokens)

    @classmethod
    def siliconflow(cls, name: str) -> Fault:
        """A status fault with one of SiliconFlow's error answers.

        ``name`` is a key of :data:`SILICONFLOW_ERRORS`: ``"bad_key"`` (401, plain text
        ``Invalid token``), ``"model_not_found"`` (400, code 20012), ``"rate_limit_rpm"``
        and ``"rate_limit_tpm"`` (429, message naming the limit), ``"overloaded"`` (503,
        code 50505), ``"unknown"`` (500).

        Raises:
            ValueError: on an unknown name.
        """
        try:
            code, body = SILICONFLOW_ERRORS[name]
        except KeyError:
            raise ValueError(
                f"unknown SiliconFlow error {name!r}; expected one of {sorted(SILICONFLOW_ERRORS)}"
            ) from None
        return cls.status(code, body)

    @classmethod
    def rate_limited(cls, retry_after: float | str | None = None, limit: str = "RPM") -> Fault:
        """SiliconFlow's 429 naming ``limit`` (``"RPM"``, ``"TPM"``, ...), with a
        ``Retry-After`` header (RFC 9110 §10.2.3) when ``retry_after`` is given: a number
        of **seconds** (sent as delta-seconds, e.g. ``12``) or a string sent as it is (an
        HTTP-date such as ``"Wed, 21 Oct 2015 07:28:00 GMT"``)."""
        body = {"code": 50603, "message": _RATE_LIMIT_MESSAGE.format(limit.upper()), "data": None}
        fault = cls.status(429, body)
        if retry_after is None:
            return fault
        value = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
        return fault.with_headers({"Retry-After": value})

    def with_headers(self, headers: Mapping[str, str]) -> Fault:
        """A copy of this fault that also sends ``headers`` with its status answer."""
        return replace(self, headers=tuple(self.headers) + tuple((str(k), str(v)) for k, v in headers.items()))

    def on(self, *paths: str) -> Fault:
        """A copy of this fault that applies to requests on ``paths`` (e.g. ``"/v1/models"``)."""
        return replace(self, paths=tuple(paths))

    # -- matching and (de)serialisation ---------------------------------------------

    def applies_to(self, path: str) -> bool:
        """Whether a request on ``path`` is subject to this fault."""
        return path in (self.paths if self.paths is not None else COMPLETION_PATHS)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, accepted by :meth:`from_dict`."""
        return {
            "kind": self.kind,
            "after_tokens": self.after_tokens,
            "status_code": self.status_code,
            "body": self.body,
            "keepalive_s": self.keepalive_s,
            "paths": list(self.paths) if self.paths is not None else None,
            "headers": dict(self.headers),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fault:
        """Build a fault from its :meth:`to_dict` form, or from ``{"siliconflow": NAME}``.

        ``{"siliconflow": NAME, "paths": [...]}`` is also accepted, and so is
        ``{"rate_limited": LIMIT, "retry_after": SECONDS}`` (:meth:`rate_limited`); any form
        may carry ``"headers": {name: value}``.

        Raises:
            ValueError: on unknown keys or invalid values.
        """
        data = dict(data)
        paths = data.pop("paths", None)
        headers = data.pop("headers", None) or {}
        if not isinstance(headers, Mapping):
            raise ValueError("'headers' must be an object of header names to values")
        if "rate_limited" in data:
            limit = data.pop("rate_limited")
            retry_after = data.pop("retry_after", None)
            if data:
                raise ValueError(f"unexpected keys with 'rate_limited': {sorted(data)}")
            if not isinstance(limit, str) or not (retry_after is None or isinstance(retry_after, (int, float, str))):
                raise ValueError("'rate_limited' needs a limit name and 'retry_after' seconds or an HTTP-date")
            fault = cls.rate_limited(retry_after, limit)
        elif "siliconflow" in data:
            name = data.pop("siliconflow")
            if data:
                raise ValueError(f"unexpected keys with 'siliconflow': {sorted(data)}")
            fault = cls.siliconflow(name)
        else:
            allowed = {"kind", "after_tokens", "status_code", "body", "keepalive_s"}
            unknown = set(data) - allowed
            if unknown:
                raise ValueError(f"unknown fault keys: {sorted(unknown)}")
            if "kind" not in data:
                raise ValueError("a fault needs 'kind' or 'siliconflow'")
            if data["kind"] == "status" and data.get("body") is None:
                fault = cls.status(data.get("status_code"))  # type: ignore[arg-type]
            else:
                try:
                    fault = cls(**data)
                except TypeError as exc:
                    raise ValueError(str(exc)) from exc
        if paths is not None:
            fault = fault.on(*paths)
        if headers:
            fault = fault.with_headers(headers)
        return fault
