"""The doctor runner: :class:`Doctor` holds what the checks share (the settings, the
timeouts, the report so far, and what one check learns for a later one: the warm round
trip, the prompt strategy, GPU offload, whether the engine is set up) and runs the checks
in the order the report shows them (``config``, ``config_ignored`` when settings were
ignored, ``network``, ``key``, ``fim``, ``ttft``,
``local_engine``, ``gpu``, ``engine``, ``cache``). Each check is a method from its own
module (configuration.py, network.py, cloud.py, fim.py, ttft.py, local.py, engine.py,
cache.py; probe.py holds the tiny request the cloud checks send); this module measures
nothing itself and adds SKIP lines for what cannot run (the configuration did not load, or
local-only mode). See docs/architecture.md (``tools/``).
"""

from __future__ import annotations

from typing import Any

from ... import config
from .base import ENGINE_CHECK_S, SKIP, Check
from .cache import CacheCheck
from .cloud import CloudChecks
from .configuration import ConfigCheck
from .engine import EngineRunCheck
from .fim import FimCheck
from .local import LocalEngineChecks
from .network import NetworkCheck
from .probe import ProbeRequests
from .ttft import TtftCheck


class Doctor(
    ConfigCheck,
    CloudChecks,
    NetworkCheck,
    ProbeRequests,
    FimCheck,
    TtftCheck,
    LocalEngineChecks,
    EngineRunCheck,
    CacheCheck,
):
    """Runs the checks for ``settings`` (None when the configuration did not load)."""

    def __init__(
        self,
        settings: config.Settings | None,
        *,
        timeout_s: float,
        engine: bool | None = None,
        config_error: str | None = None,
        engine_timeout_s: float = ENGINE_CHECK_S,
        ignored: list[str] | None = None,
    ) -> None:
        """``engine``: None (the default) runs the engine check when the managed engine is
        set up (or an external one is in use); True also runs an external engine that is
        not in use and judges a managed one as if it were; False skips it. ``ignored``:
        one line per setting (or config file) the settings were resolved without, as
        serve ignores them: one WARN (``config_ignored``)."""
        self.settings = settings
        self.timeout_s = timeout_s
        self.start_engine = engine
        self.engine_timeout_s = engine_timeout_s
        self.engine_setup_ok = False  # the local_engine check found llama-cpp-python and a GGUF
        self.config_error = config_error
        self.ignored = list(ignored or ())
        self.checks: list[Check] = []
        self.rtt_ms: float | None = None  # warm HTTP round trip to the base URL
        self.cloud_usable = False  # reachable and the key was not rejected
        self.strategy: str | None = None  # the prompt strategy the TTFT check uses
        self.offload: bool | None = None  # llama_cpp.llama_supports_gpu_offload(), when importable

    def add(self, *args: Any, **kwargs: Any) -> Check:
        c = Check(*args, **kwargs)
        self.checks.append(c)
        return c

    async def run(self) -> list[Check]:
        self.check_config()
        self.check_ignored()
        self.check_exclusion()
        s = self.settings
        if s is None:
            for key, title in (
                ("network", "base URL"),
                ("key", "API key"),
                ("fim", "FIM"),
                ("ttft", "TTFT"),
                ("local_engine", "local engine"),
                ("gpu", "GPU"),
                ("engine", "engine run"),
                ("cache", "cache"),
            ):
                self.add(key, title, SKIP, "skipped: the configuration did not load")
            return self.checks
        if s.cloud_provider is None:
            self.add(
                "network",
                "base URL",
                SKIP,
                "skipped: no cloud backend is configured (local-only mode); set SILICONFLOW_API_KEY or "
                "SIDECAR_BASE_URL to use one",
            )
            for key, title in (("key", "API key"), ("fim", "FIM"), ("ttft", "TTFT")):
                self.add(key, title, SKIP, "skipped (local-only mode)")
        else:
            await self.check_cloud()
        self.check_local_engine()
        self.check_gpu()
        await self.check_engine_run()
        await self.check_cache()
        return self.checks
