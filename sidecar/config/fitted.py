"""Setting defaults that benchmarks choose, kept where both the settings and the code
that uses them can read them (the settings are below the completion layer): the
confidence gate's bar and the least time on screen that makes a passed-over suggestion
a reject (``completion/gate.py``; docs/benchmarks.md, "Confidence gate").
"""

from __future__ import annotations

#: The default ``gate_threshold``: the bar chosen with the gate's fitted weights
#: (``completion/gate.py``; docs/benchmarks.md, "Confidence gate").
DEFAULT_THRESHOLD = 0.53
#: The default ``gate_seen_ms``: the least time on screen (ms) for a passed-over suggestion
#: to teach a reject. The typing benchmark's typist (``devtools/bench/typist.py``) waits a
#: median 140 ms between keys and under 300 ms for 95 % of them; a person needs a few
#: hundred ms to read a line of ghost text at all.
DEFAULT_SEEN_MS = 400
