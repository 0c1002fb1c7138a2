"""``sidecar doctor``: check the configuration, the cloud backend, the local engine and the
cache, and say what to fix.

Checks, in order (each gives OK, WARN, FAIL, INFO or SKIP, the measured value, and for
anything not OK one sentence saying what to do):

1. ``config``: the config file and environment load (as ``sidecar config`` resolves them);
   mode, provider, base URL, model, cache path, and whether an API key is set (the key
   itself is never printed).
2. ``network``: TCP connect, TLS handshake (https) and HTTP round trip to the base URL
   (``GET {base}/models`` on a new connection, then again on the kept-alive one).
3. ``key``: ``GET /models`` with the key: rejected, or accepted with the model list, and
   whether the configured model is in it.
4. ``fim``: how the sidecar will send the prompt (``choose_strategy``). For SiliconFlow's
   native FIM (``suffix``) one tiny streamed ``/completions`` request checks that the model
   takes it.
5. ``ttft``: time to the first streamed token of a tiny request, as the sidecar sends it.
6. ``local_engine`` and ``gpu``: llama-cpp-python, the model file (present and a GGUF), GPU
   offload support, ``nvidia-smi``.
7. ``engine``: a real run of the managed engine in its own process, as the sidecar starts
   it (:class:`~sidecar.backends.managed_engine.ManagedEngine`, with its ~180-token warm-up),
   then one streamed completion of a ~330-token prompt for 16 tokens: time to the first
   token, total time, tokens/s; a crash (SIGSEGV on CPUs with Intel AMX) names the signal,
   the engine log and the fix. It runs by default whenever the managed engine is set up;
   ``--no-engine`` skips it, ``--engine`` also runs an external engine that is not in use.
8. ``cache``: the SQLite cache file: size, mode, ``PRAGMA quick_check``, entries.

Cloud checks (2-5) are skipped when no cloud backend is configured. Exit code 0 when no
check FAILs, 1 otherwise. This is a command-line tool: it writes to stdout (it is not
the LSP server).

The package has one module per check (docs/architecture.md, ``tools/``): configuration.py
(1), network.py (2), cloud.py (the cloud checks' driver and 3), fim.py (4), ttft.py (5),
local.py (6), engine.py (7), cache.py (8); probe.py holds the tiny request 4, 5 and 7
send, base.py the status words, :class:`Check` and shared helpers, core.py the
:class:`Doctor` that runs the checks in order, render.py the text and JSON report, and
cli.py :func:`main`.
"""

from __future__ import annotations

from .cli import main

__all__ = ["main"]
