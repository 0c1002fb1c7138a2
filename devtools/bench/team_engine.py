"""The team benchmark's shared engine, run as its own process.

``python -m devtools.bench.team_engine SPEC.json``: one :class:`SimulatedBackend` with a
:class:`~devtools.simulator.shared_engine.SharedEngine` in front of its ``/v1`` endpoints,
answering with the :class:`~devtools.bench.truth.Oracle` of every developer's file, and,
when the spec sets them, RPM/TPM limits (429 with ``Retry-After``). It writes its base URL
to ``spec["url_file"]`` once listening and serves until SIGTERM/SIGINT. The bench reads
the engine's counters with ``GET /_sim/engine`` and resets them with
``POST /_sim/engine/reset`` when typing starts.

Spec keys: ``files`` (list of :meth:`TrueFile.to_dict`), ``seed``, ``wrong_rate``,
``engine`` (:class:`EngineConfig` keys), ``rpm``, ``tpm`` (None: no limit), ``url_file``.
"""

from __future__ import annotations

import sys

from .simproc import main as _main


def main(argv: list[str] | None = None) -> int:
    """Serve ``SPEC.json`` (the keys above) until SIGTERM; exit status 2 on bad usage."""
    return _main(argv, name="team_engine")


if __name__ == "__main__":
    sys.exit(main())
