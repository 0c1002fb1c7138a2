"""HTTP control endpoints of the simulated backend, for driving it from another process.

All bodies are JSON. Errors answer 400 ``{"error": MESSAGE}``.

- ``GET  /_sim/requests``: list of records (:meth:`RecordedRequest.to_dict`).
- ``POST /_sim/script``: ``{"outputs": [str, ...]}`` appends scripted outputs.
- ``POST /_sim/latency``: ``{"ttft_ms", "ttft_jitter", "tokens_per_s", "seed"}``; missing
  keys keep their current values. Answers the new model.
- ``POST /_sim/fault``: a :meth:`Fault.to_dict` form or ``{"siliconflow": NAME}``, plus
  optional ``"persistent": true``.
- ``POST /_sim/clear_faults``: drops all faults.
- ``POST /_sim/loading``: ``{"seconds": S}`` simulates a model load of ``S`` seconds
  (see :meth:`SimulatedBackend.set_loading`).
- ``POST /_sim/rate_limits``: ``{"rpm", "tpm", "retry_after_s", "send_retry_after"}``
  (see :meth:`SimulatedBackend.set_rate_limits`; missing keys: no limit, computed wait,
  header sent). Answers the limiter's state.
- ``POST /_sim/engine``: :class:`~devtools.simulator.shared_engine.EngineConfig` keys
  (missing ones: defaults) put a new shared engine in front of the ``/v1`` generation
  endpoints; ``{"enabled": false}`` removes it. Answers its counters.
- ``GET  /_sim/engine``: the engine's counters (:meth:`SimulatedBackend.engine_stats`), or
  ``null`` without an engine.
- ``POST /_sim/engine/reset``: starts the engine's counters afresh (cache and queue stay).
- ``POST /_sim/reset``: forgets records, script, faults, rate limits, the engine and the
  simulated load; restores the initial latency.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .faults import Fault
from .latency import LatencyModel
from .shared_engine import EngineConfig

if TYPE_CHECKING:
    from .server import SimulatedBackend


def _bad(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)


async def _json_object(request: web.Request) -> dict[str, Any]:
    try:
        data = json.loads(await request.read() or b"{}")
    except ValueError as exc:
        raise ValueError(f"body is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("body must be a JSON object")
    return data


def add_control_routes(app: web.Application, sim: SimulatedBackend) -> None:
    """Register the ``/_sim/...`` routes of ``sim`` on ``app``."""

    async def get_requests(request: web.Request) -> web.Response:
        return web.json_response([r.to_dict() for r in sim.requests])

    async def post_script(request: web.Request) -> web.Response:
        try:
            data = await _json_object(request)
            outputs = data.get("outputs")
            if not isinstance(outputs, list):
                raise ValueError("'outputs' must be a list of strings")
            sim.script(outputs)
        except (ValueError, TypeError) as exc:
            return _bad(str(exc))
        return web.json_response({"pending_outputs": sim.pending_outputs})

    async def post_latency(request: web.Request) -> web.Response:
        try:
            model = LatencyModel.from_dict(await _json_object(request), base=sim.latency)
        except ValueError as exc:
            return _bad(str(exc))
        sim.set_latency(model)
        return web.json_response(model.to_dict())

    async def post_fault(request: web.Request) -> web.Response:
        try:
            data = await _json_object(request)
            persistent = bool(data.pop("persistent", False))
            fault = Fault.from_dict(data)
        except ValueError as exc:
            return _bad(str(exc))
        sim.inject(fault, persistent=persistent)
        return web.json_response({"fault": fault.to_dict(), "persistent": persistent})

    async def post_clear_faults(request: web.Request) -> web.Response:
        sim.clear_faults()
        return web.json_response({"ok": True})

    async def post_loading(request: web.Request) -> web.Response:
        try:
            data = await _json_object(request)
            seconds = data.get("seconds")
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise ValueError("'seconds' must be a number")
            sim.set_loading(float(seconds))
        except ValueError as exc:
            return _bad(str(exc))
        return web.json_response({"loading_s": sim.loading_s})

    async def post_rate_limits(request: web.Request) -> web.Response:
        try:
            data = await _json_object(request)
            unknown = set(data) - {"rpm", "tpm", "retry_after_s", "send_retry_after"}
            if unknown:
                raise ValueError(f"unknown keys: {sorted(unknown)}")
            wait = data.get("retry_after_s")
            if wait is not None and (isinstance(wait, bool) or not isinstance(wait, (int, float))):
                raise ValueError("'retry_after_s' must be a number of seconds or null")
            sim.set_rate_limits(
                data.get("rpm"),
                data.get("tpm"),
                retry_after_s=wait,
                send_retry_after=bool(data.get("send_retry_after", True)),
            )
        except ValueError as exc:
            return _bad(str(exc))
        return web.json_response(sim.rate_limiter.to_dict())

    async def post_engine(request: web.Request) -> web.Response:
        try:
            data = await _json_object(request)
            enabled = data.pop("enabled", True)
            if not isinstance(enabled, bool):
                raise ValueError("'enabled' must be true or false")
            sim.set_engine(EngineConfig.from_dict(data) if enabled else None)
        except (ValueError, TypeError) as exc:
            return _bad(str(exc))
        return web.json_response(sim.engine_stats())

    async def get_engine(request: web.Request) -> web.Response:
        return web.json_response(sim.engine_stats())

    async def post_engine_reset(request: web.Request) -> web.Response:
        sim.reset_engine_counters()
        return web.json_response(sim.engine_stats())

    async def post_reset(request: web.Request) -> web.Response:
        sim.reset()
        return web.json_response({"ok": True})

    app.router.add_get("/_sim/requests", get_requests)
    app.router.add_post("/_sim/script", post_script)
    app.router.add_post("/_sim/latency", post_latency)
    app.router.add_post("/_sim/fault", post_fault)
    app.router.add_post("/_sim/clear_faults", post_clear_faults)
    app.router.add_post("/_sim/loading", post_loading)
    app.router.add_post("/_sim/rate_limits", post_rate_limits)
    app.router.add_post("/_sim/engine", post_engine)
    app.router.add_get("/_sim/engine", get_engine)
    app.router.add_post("/_sim/engine/reset", post_engine_reset)
    app.router.add_post("/_sim/reset", post_reset)
