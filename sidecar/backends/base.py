"""What every backend takes and gives: an upstream request and a stream of text deltas."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .errors import BackendError
    from .managed_engine import ManagedEngine
    from .ratelimit import CoolDown

log = logging.getLogger(__name__)


@dataclass
class UpstreamRequest:
    """One request as the backend will send it.

    ``endpoint`` is relative to the base URL (``completions`` or ``chat/completions``);
    ``body`` is the JSON body without ``model`` and ``stream`` (the backend adds them);
    ``strategy`` names how the prompt was built (``suffix``, ``template``, ``chat``, ``prefix``).
    ``read_timeout_s`` (seconds), when set, replaces the client's read timeout (the longest
    gap between bytes) for this request: a cold backend may send nothing while it loads.
    """

    endpoint: str
    body: dict[str, Any]
    strategy: str
    read_timeout_s: float | None = None

    @property
    def used_suffix(self) -> bool:
        return "suffix" in self.body and self.endpoint == "completions"


@dataclass
class StreamInfo:
    """Timing and facts about one upstream stream. Times are ``time.perf_counter()`` seconds."""

    sent_at: float = 0.0
    headers_at: float = 0.0
    first_token_at: float = 0.0
    ended_at: float = 0.0
    trace_id: str | None = None
    finish_reason: str | None = None
    events: int = 0
    malformed_events: int = 0
    truncated: bool = False  # the connection ended without [DONE]
    usage: dict[str, Any] = field(default_factory=dict)
    phases: int = 1  # upstream requests this stream took (2: a healing grammar, then plain)
    #: ``(token text, natural log-probability)`` of each generated token, where the
    #: backend sent them (OpenAI ``logprobs``: legacy completions' ``token_logprobs``,
    #: chat's ``logprobs.content``); empty otherwise. The confidence gate reads them.
    token_logprobs: list[tuple[str, float]] = field(default_factory=list)
    #: Called by the backend when the response headers arrive (the first bytes from it).
    on_headers: Callable[[], None] | None = None

    @property
    def ttft_ms(self) -> float | None:
        if not self.first_token_at:
            return None
        return (self.first_token_at - self.sent_at) * 1000.0


#: A surrogate code point: half of a UTF-16 pair, which UTF-8 cannot encode. A Python
#: string holds one only where the editor's JSON escaped a lone half (``"\\ud83d"``,
#: legal JSON); a whole pair is decoded to one code point.
_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (one UTF-16 unit for one, so
    lengths counted in UTF-16 units stay as they were)."""
    return _SURROGATE.sub("\ufffd", text)


def _cleaned(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_cleaned(v) for v in value]
    return value


def json_body(value: Any) -> bytes:
    """``value`` as the UTF-8 JSON body of an upstream request (compact, strict: NaN and
    infinities raise ValueError). Every request body goes through here: text from the
    editor may hold a lone surrogate, which UTF-8 cannot encode (httpx's ``json=`` raises
    UnicodeEncodeError), so strings that hold one are sent with U+FFFD in its place."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(_cleaned(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


#: Headers of a request whose content is :func:`json_body`.
JSON_HEADERS = {"Content-Type": "application/json"}


def parse_json_object(raw: bytes, info: StreamInfo, what: str = "stream line") -> dict[str, Any] | None:
    """``raw`` (one SSE event's data or one NDJSON line) as a JSON object, or None when
    it is not one: counted in ``info.malformed_events`` and logged (``what`` names it)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    if not isinstance(obj, dict):
        info.malformed_events += 1
        log.warning("skipped a malformed %s (%d bytes)", what, len(raw))
        return None
    return obj


class Backend(Protocol):
    """A place completions come from, as the completion service uses it (every ability
    is declared here; :class:`BackendBase` gives the defaults). ``name`` is shown to
    users; ``model`` is the model id; ``provider`` who serves (``siliconflow``,
    ``openai`` or ``local``: ``sidecar/providers.py``); ``api`` the wire format it speaks
    (``openai``, ``siliconflow``, ``llama-cpp-python``, ``llama-server``, ``ollama``: a
    dialect of ``completion/dialects.py``); ``base_url`` the URL requests go
    to (``""`` when there is none yet); ``engine`` the managed engine process of the
    embedded default (None otherwise); ``cooldown`` its 429/503 state
    (``ratelimit.CoolDown``, None for a backend that never cools down); ``ready`` False
    while a managed engine is known to be down; ``headers_before_prompt`` True when the
    response headers come before the prompt is read (llama-cpp-python's server), so
    they do not show that the model is loaded: only the first text does;
    ``loads_models`` True for an engine that may load its model on a request (the
    managed engine, llama-server, Ollama): only there is a first stream that has sent
    nothing a model load to wait for (``completion/coldstart.py``); on a cloud or another
    OpenAI-compatible server it is a fault, and requests go on without it.

    The facts are read-only here: a router computes them from the side in use."""

    @property
    def name(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def provider(self) -> str: ...
    @property
    def api(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def engine(self) -> ManagedEngine | None: ...
    @property
    def cooldown(self) -> CoolDown | None: ...
    @property
    def ready(self) -> bool: ...
    @property
    def headers_before_prompt(self) -> bool: ...
    @property
    def loads_models(self) -> bool: ...

    #: Notices that need no action (engine restarts): the service wires its log channel.
    notify: Callable[[str], None]
    #: ``progress(kind, message)`` around model loads, ``kind`` ``begin`` or ``end``.
    progress: Callable[[str, str], None]
    #: Failed background starts of auto mode's local side.
    on_local_error: Callable[[BackendError], None]

    async def ensure_ready(self) -> None:
        """Wait until the backend can take a request (a managed engine may still be loading).

        Raises BackendError when it cannot become ready.
        """

    def stream(self, req: UpstreamRequest, info: StreamInfo) -> AsyncGenerator[str, None]:
        """Yield completion text deltas as they arrive (an async generator); closing it
        (``aclose()``) closes the upstream connection. Raises BackendError on an HTTP or transport failure."""

    def expect_prompt(self, prompt: str) -> None:
        """A request with ``prompt`` waits for this backend's engine to start: a managed
        engine runs its warm-up on that prompt (``ManagedEngine.wait_ready``); others
        ignore it."""

    async def prewarm(self) -> None:
        """Open a pooled connection ahead of need. Never raises."""

    async def aclose(self) -> None:
        """Release connections and child processes."""

    def pick(self) -> Backend:
        """The concrete backend the next stream goes to (a router picks a side)."""

    def all_backends(self) -> tuple[Backend, ...]:
        """This backend and the ones it routes to (for wiring callbacks)."""

    def record(self, target: Backend, error: BackendError | None) -> None:
        """The outcome of one stream on ``target`` (None: success), for a router's breaker."""

    def idle_for_s(self) -> float:
        """Seconds since the last upstream traffic (inf when none yet)."""

    def has_idle_connection(self) -> bool:
        """True when a pooled keep-alive connection is idle (True when unknown)."""

    def busy_connections(self) -> int | None:
        """Pooled connections carrying a request (None when unknown)."""


class BackendBase:
    """Defaults of the :class:`Backend` abilities that not every backend has: no engine,
    no cooldown, always ready, itself as the pick, no breaker, no pool facts. Concrete
    backends inherit from it and override what they have."""

    headers_before_prompt: bool = False
    loads_models: bool = False

    # Read-only here, so that a backend may compute them (a router, an engine's state);
    # one that stores them declares them as attributes (OpenAICompatBackend,
    # LocalEngineBackend).
    @property
    def engine(self) -> ManagedEngine | None:
        return None

    @property
    def cooldown(self) -> CoolDown | None:
        return None

    @property
    def base_url(self) -> str:
        return ""

    @property
    def ready(self) -> bool:
        return True

    def __init__(self) -> None:
        self.notify: Callable[[str], None] = lambda _msg: None
        self.progress: Callable[[str, str], None] = lambda _kind, _msg: None
        self.on_local_error: Callable[[BackendError], None] = lambda _err: None

    def expect_prompt(self, prompt: str) -> None:
        return None

    def pick(self) -> Backend:
        return self  # type: ignore[return-value]  # each concrete backend completes the protocol

    def all_backends(self) -> tuple[Backend, ...]:
        return (self,)  # type: ignore[return-value]  # as pick()

    def record(self, target: Backend, error: BackendError | None) -> None:
        return None

    def idle_for_s(self) -> float:
        return 0.0

    def has_idle_connection(self) -> bool:
        return True

    def busy_connections(self) -> int | None:
        return None
