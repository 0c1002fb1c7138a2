"""How a start of the managed engine is judged: the warm-up prompt that shows the engine
can answer a real prompt, and how a failed start or an exit is described
(docs/architecture.md, "The embedded engine").

llama-cpp-python's server has no ``/health``, so readiness is a 200 from
``GET /v1/models`` followed by one warm-up completion
(:meth:`~.managed_engine.ManagedEngine.wait_ready`): on the prompt of the request waiting
for the engine when there is one (2 tokens asked for), else on :func:`warmup_prompt`
(~180 tokens, ``WARMUP_MAX_TOKENS`` asked for). An engine that dies on a signal or during
the warm-up counts as a start-up crash (:class:`EngineStartError`, ``crashed``).
"""

from __future__ import annotations

import signal

from .errors import ENGINE, BackendError


def describe_exit(returncode: int | None) -> str:
    """``"crashed with SIGSEGV (signal 11)"`` for a signal, ``"exited with code 1"`` else."""
    if returncode is None:
        return "is still running"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"crashed with {name} (signal {-returncode})"
    return f"exited with code {returncode}"


def warmup_prompt(functions: int = 2) -> str:
    """A code prompt of ``functions`` small functions plus a header: about 75 tokens per
    function with SmolLM2's tokenizer (2: ~180 tokens, the start-up warm-up; 4: ~330,
    ``sidecar doctor``'s engine check; cl100k counts 161 and 298).

    A one-token warm-up passes on an engine that crashes on every real prompt (the AMX
    path in ggml runs only for batches of more than one token), so the warm-up must be a
    prompt like a real one."""
    lines = ["# Inventory helpers: stock levels, reorder points and a small report.", ""]
    items = ("apples", "pears", "plums", "cherries", "grapes", "lemons", "limes", "figs")
    for i, item in enumerate(items[: max(1, min(functions, len(items)))]):
        lines += [
            f"def reorder_{item}(stock: int, daily_use: float, lead_days: int = {i + 2}) -> int:",
            f'    """How many {item} to order so stock lasts the lead time plus a week."""',
            "    need = int(daily_use * (lead_days + 7)) - stock",
            "    return max(0, need)",
            "",
        ]
    lines.append("def report(levels: dict[str, int]) -> str:")
    return "\n".join(lines) + "\n"


#: Tokens the warm-up asks for: enough to run the decode path several times.
WARMUP_MAX_TOKENS = 8


class EngineStartError(BackendError):
    """The engine died or failed during start-up. ``crashed`` is True when it was killed
    by a signal or exited during the warm-up prompt (it loaded, then failed on a real
    prompt); ``returncode`` is the process's (negative: the signal)."""

    def __init__(
        self, message: str, *, returncode: int | None = None, crashed: bool = False, permanent: bool = False
    ) -> None:
        super().__init__(ENGINE, message, permanent=permanent)
        self.returncode = returncode
        self.crashed = crashed
