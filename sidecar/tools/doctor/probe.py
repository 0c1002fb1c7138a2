"""The tiny completion request the ``fim`` and ``ttft`` checks and the external engine run
send: a FIM task (write the body of ``add``), the streaming of it until the first text
(bounded by ``--timeout``, in seconds), and the report line for a backend error.

It is not a check of its own. In :meth:`ProbeRequests._error_check`, FAIL: the model is
not found, the key was rejected, a timeout or connection error, a server error or an
answer that is not an event stream; WARN: rate limited, overloaded, or another client
error. See docs/architecture.md (``backends/``, ``completion/``, ``tools/``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from .base import FAIL, WARN, _CheckMixin

if TYPE_CHECKING:
    from ...backends.base import StreamInfo, UpstreamRequest
    from ...backends.errors import BackendError
    from ...completion.context import CompletionContext

# A tiny FIM task: the model should write the body of ``add``.
_PREFIX = "def add(a, b):\n    return"
_SUFFIX = "\n\n\nprint(add(1, 2))\n"


class ProbeRequests(_CheckMixin):
    """Helpers of :class:`~sidecar.tools.doctor.core.Doctor` shared by fim.py, ttft.py and
    engine.py."""

    def _context(self) -> CompletionContext:
        from ...completion.context import CompletionContext

        return CompletionContext(
            prefix=_PREFIX, suffix=_SUFFIX, line_prefix="    return", line_suffix="", language="python", eol="\n"
        )

    def _error_check(self, key: str, title: str, err: BackendError, what: str, data: dict[str, Any]) -> None:
        """A check line for a BackendError from ``what`` (a FIM probe or the TTFT request)."""
        from ...backends import errors as E

        data = {**data, "kind": err.kind, "status": err.status}
        if err.kind == E.RATE_LIMITED:
            self.add(
                key,
                title,
                WARN,
                f"rate limited (HTTP {err.status}) during {what}",
                f"{err.message} Run doctor again later, or raise your account's limits.",
                data,
            )
        elif err.kind == E.OVERLOADED:
            self.add(key, title, WARN, f"overloaded (HTTP {err.status}) during {what}", err.message, data)
        elif err.kind == E.MODEL_NOT_FOUND:
            self.add(key, title, FAIL, f"model not found (HTTP {err.status})", err.message, data)
        elif err.kind == E.BAD_KEY:
            self.add(key, title, FAIL, f"the key was rejected (HTTP {err.status})", err.message, data)
        elif err.kind in (E.TIMEOUT, E.CONNECTION):
            self.add(
                key,
                title,
                FAIL,
                f"{what} failed: {err.message}",
                "Check the network; if the model is slow to start, raise SIDECAR_REQUEST_TIMEOUT_MS "
                "or run doctor with a larger --timeout.",
                data,
            )
        elif err.status >= 500 or err.kind == E.UNKNOWN:
            # A server error (not "overloaded") or an answer that is not an event stream:
            # no completion can work like this.
            self.add(
                key,
                title,
                FAIL,
                f"{what} failed (HTTP {err.status})" if err.status else f"{what} failed",
                f"{err.message} Check the base URL and the server's logs.",
                data,
            )
        else:
            self.add(key, title, WARN, f"{what} failed (HTTP {err.status})", err.message, data)

    async def _first_token(self, backend: Any, req: UpstreamRequest) -> tuple[StreamInfo, str]:
        """Stream ``req`` until the first text delta (or the end); returns (StreamInfo, text)."""
        from ...backends.base import StreamInfo

        info = StreamInfo()
        text = ""

        async def go() -> None:
            nonlocal text
            async with contextlib.aclosing(backend.stream(req, info)) as it:
                async for delta in it:
                    text = delta
                    break

        await asyncio.wait_for(go(), self.timeout_s)
        return info, text
