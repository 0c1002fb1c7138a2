"""Which backends are warm, and the deadline a stream gets until its first text.

A backend is *warm* once any byte came from it since it started or came back (the
stream runner marks it, ``StreamRunner.run``); a connection or engine error makes it
cold again (when it comes back it may load its model again). Until its first text a
stream gets ``cold_start_timeout_ms`` on a cold backend that loads models (it may be
loading the model), and so does the first stream to a cold cloud (its model may be
waking: ``coldstart.py``); on a warm local engine ``prefill_timeout_ms`` (it may be
evaluating a long prompt, and cutting it would throw that work away: it may run on in
the background, ``session.py``); then, and on a cloud, ``request_timeout_ms``. See
docs/architecture.md ("Cold backends", "Long prompts on a warm local engine").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..providers import is_local

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..config import Settings


def warm_key_of(target: Backend) -> str:
    """Identity of one running backend: a managed engine's process, else its URL."""
    engine = target.engine
    if engine is not None:
        return f"managed:{engine.pid}"
    return f"{target.provider}:{target.base_url}"


class WarmBackends:
    """The backends (by :func:`warm_key_of`) that have sent a stream event."""

    def __init__(self) -> None:
        self._keys: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def add(self, key: str) -> None:
        """A byte came from the backend ``key``."""
        self._keys.add(key)

    def discard(self, key: str) -> None:
        """The backend ``key`` went away (connection refused, engine gone)."""
        self._keys.discard(key)

    def first_text_deadline_ms(self, target: Backend, settings: Settings, *, waking: bool = False) -> float:
        """The deadline (ms) of a stream to ``target`` until its first text (module doc);
        ``waking``: the one stream a cold cloud gets to wake its model (coldstart.py)."""
        deadline_ms = settings.request_timeout_ms
        if warm_key_of(target) not in self._keys and (target.loads_models or waking):
            return max(deadline_ms, settings.cold_start_timeout_ms)
        if is_local(target.provider):
            return max(deadline_ms, settings.prefill_timeout_ms)
        return deadline_ms
