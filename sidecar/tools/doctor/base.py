"""What every ``sidecar doctor`` check shares: the status words, the timeouts, the TTFT
threshold that both the cloud TTFT check and the external engine run judge by, one line of
the report (:class:`Check`), and small helpers (milliseconds, ``host:port``, a key-free
cause of a transport error, signal names, file sizes, redaction).

Status words, the same for every check: OK (nothing to do); WARN (it works, but slower or
weaker than it should: the line says what to change; the exit code stays 0); FAIL (the
sidecar cannot work like this: exit code 1); INFO (a fact, nothing to judge); SKIP (not
run, with the reason). Times are milliseconds (``_ms``, names ending in ``_MS``) unless a
name ends in ``_S`` (seconds). docs/architecture.md (``tools/``) places doctor in the code.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

import httpx2 as httpx

if TYPE_CHECKING:
    from ... import config
    from ...backends.base import StreamInfo, UpstreamRequest
    from ...backends.errors import BackendError
    from ...completion.context import CompletionContext

OK, WARN, FAIL, INFO, SKIP = "OK", "WARN", "FAIL", "INFO", "SKIP"
SLOW_TTFT_MS = 1500.0
DEFAULT_TIMEOUT_S = 10.0
#: The engine check's overall bound (start-up, warm-up and the check prompt), in seconds.
ENGINE_CHECK_S = 120.0


@dataclass
class Check:
    """One line of the report. ``fix`` is one sentence saying what to do (empty when OK);
    ``data`` holds the measured values for ``--json``."""

    key: str
    title: str
    status: str
    value: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)


class DoctorState:
    """The state of :class:`~sidecar.tools.doctor.core.Doctor` that the check mixins
    (configuration.py, cloud.py, network.py, probe.py, fim.py, ttft.py, local.py,
    engine.py, cache.py) share: set in ``Doctor.__init__``, some of it updated by an
    earlier check for a later one. Annotations only."""

    settings: config.Settings | None
    timeout_s: float
    start_engine: bool | None
    engine_timeout_s: float
    engine_setup_ok: bool
    config_error: str | None
    ignored: list[str]
    checks: list[Check]
    rtt_ms: float | None
    cloud_usable: bool
    strategy: str | None
    offload: bool | None


class DoctorCalls(Protocol):
    """The methods of :class:`~sidecar.tools.doctor.core.Doctor` that one check mixin calls
    on another (or on ``Doctor`` itself)."""

    def add(self, *args: Any, **kwargs: Any) -> Check: ...

    # network.py, fim.py, ttft.py (called by cloud.py)
    async def check_network(self, client: httpx.AsyncClient, base: str) -> httpx.Response | None: ...

    async def check_fim(self, backend: Any) -> None: ...

    async def check_ttft(self, backend: Any) -> None: ...

    # probe.py (used by fim.py, ttft.py, engine.py)
    def _context(self) -> CompletionContext: ...

    def _error_check(self, key: str, title: str, err: BackendError, what: str, data: dict[str, Any]) -> None: ...

    async def _first_token(self, backend: Any, req: UpstreamRequest) -> tuple[StreamInfo, str]: ...

    # local.py (used by engine.py)
    def _uses_local(self) -> bool: ...


if TYPE_CHECKING:

    class _CheckMixin(DoctorState, DoctorCalls):
        """The base of every check mixin, for type checking."""

else:
    _CheckMixin = DoctorState


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _host_of(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or url
    return f"{host}:{parts.port}" if parts.port else host


def _cause(exc: BaseException) -> str:
    """A short, key-free description of a transport failure: the innermost OS error when
    there is one ("Connection refused", "Name or service not known"), else the exception."""
    if isinstance(exc, (asyncio.TimeoutError, httpx.TimeoutException)):
        return f"no answer in time ({type(exc).__name__})"
    inner: BaseException | None = exc
    seen = 0
    while inner is not None and seen < 10:
        if isinstance(inner, OSError) and inner.errno is not None:
            text = os.strerror(inner.errno) if inner.errno > 0 else (inner.strerror or str(inner))
            return f"{text} (errno {inner.errno})"
        inner = inner.__cause__ or inner.__context__
        seen += 1
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _signal_name(returncode: int | None) -> str | None:
    """ "SIGSEGV" for a process killed by signal 11 (``returncode`` -11), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def _size(n: int) -> str:
    if n < 10 * 1024:
        return f"{n} bytes"
    if n < 10 * 1024 * 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def _redact(text: str, secrets: list[str]) -> str:
    """The shared redaction step (observability/redact.py), with ``secrets`` as well."""
    from ...observability.redact import redact

    return redact(text, secrets)
