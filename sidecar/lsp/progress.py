"""Model loads as LSP work-done progress (LSP 3.17+, ``window/workDoneProgress/create`` and
``$/progress`` with ``begin``/``end``), for clients that declare
``window.workDoneProgress``. Never awaited: the create request's answer arrives on its own
and the ``begin`` is sent from its callback (docs/architecture.md, "Facts we checked": awaiting client requests inside
handlers is unsafe with pygls 2.1.1).
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

from lsprotocol import types

log = logging.getLogger(__name__)


class LoadProgress:
    """One progress bar at a time for "loading the local model". ``begin(message)`` opens
    it (no-op while one is open or when the client does not support progress);
    ``end(message)`` closes it."""

    def __init__(self, server: Any) -> None:
        self._server = server
        self._ids = itertools.count(1)
        self._token: str | None = None
        self._state = "idle"  # idle | creating | open

    def supported(self) -> bool:
        caps = getattr(self._server, "client_capabilities", None)
        window = getattr(caps, "window", None)
        return bool(getattr(window, "work_done_progress", False))

    def begin(self, message: str) -> None:
        if self._state != "idle" or not self.supported():
            return
        token = f"sidecar-load-{next(self._ids)}"
        self._token, self._state = token, "creating"
        title = "sidecar"

        def created(*_args: Any, **_kwargs: Any) -> None:
            if self._token != token or self._state != "creating":
                return  # ended before the client answered
            self._state = "open"
            self._server.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=title, message=message, cancellable=False)
            )

        try:
            self._server.work_done_progress.create(token, created)
        except Exception:  # noqa: BLE001 - progress is cosmetic
            log.debug("work done progress create failed", exc_info=True)
            self._token, self._state = None, "idle"

    def end(self, message: str) -> None:
        token, state = self._token, self._state
        self._token, self._state = None, "idle"
        if token is None or state != "open":
            return
        try:
            self._server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
            self._server.work_done_progress.tokens.pop(token, None)
        except Exception:  # noqa: BLE001
            log.debug("work done progress end failed", exc_info=True)
