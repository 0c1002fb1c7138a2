"""A simulated OpenAI/SiliconFlow-compatible backend for tests and benchmarks.

It is a real HTTP server (aiohttp) on 127.0.0.1 that streams scripted or computed
completions with a configurable latency, injects faults (error statuses, stalls, cut
connections, malformed events) and records every request, including when its client
disconnected. With a shared engine (:mod:`.shared_engine`) it also models many clients
on one server: slots, a queue, a prefix cache, batched decoding. Run it in-process
(``async with SimulatedBackend() as sim``) or as a process: ``python -m devtools.simulator --port 8123``.
"""

from .faults import COMPLETION_PATHS, SILICONFLOW_ERRORS, Fault
from .latency import LatencyModel
from .recorder import RecordedRequest
from .responses import TRACE_HEADER
from .server import DEFAULT_MODEL, DEFAULT_OUTPUT, Responder, SimulatedBackend
from .shared_engine import EngineConfig, SharedEngine
from .tokens import split_tokens

__all__ = [
    "COMPLETION_PATHS",
    "DEFAULT_MODEL",
    "DEFAULT_OUTPUT",
    "EngineConfig",
    "SILICONFLOW_ERRORS",
    "TRACE_HEADER",
    "Fault",
    "LatencyModel",
    "RecordedRequest",
    "Responder",
    "SharedEngine",
    "SimulatedBackend",
    "split_tokens",
]
