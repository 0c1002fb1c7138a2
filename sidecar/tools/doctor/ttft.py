"""The ``ttft`` check: time to the first streamed token, in milliseconds, of a tiny
request (8 tokens at most) sent exactly as the sidecar sends it (the strategy the FIM
check chose), on a connection already warmed (``prewarm``), so connect and TLS are not in
it; the value also gives the network round trip from the network check.

WARN: above ``SLOW_TTFT_MS`` (1500 ms), naming the likely cause (the network when the round
trip is at least half of it, else the model), or an answer with no text. FAIL: no token
within ``--timeout`` seconds, or an error no completion could survive (see probe.py). See
docs/architecture.md (``backends/``, ``tools/``).
"""

from __future__ import annotations

from typing import Any

from .base import FAIL, OK, SLOW_TTFT_MS, WARN, _CheckMixin, _ms


class TtftCheck(_CheckMixin):
    """``check_ttft``, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def check_ttft(self, backend: Any) -> None:
        from ...backends import errors as E
        from ...completion.prompts import build_request

        s = self.settings
        assert s is not None
        strategy = self.strategy or "suffix"
        req = build_request(
            self._context(), strategy, api=backend.api, model=backend.model, max_tokens=8, temperature=0.0
        )
        await backend.prewarm()  # the sidecar keeps a warm connection; measure without connect/TLS
        data: dict[str, Any] = {"strategy": strategy, "round_trip_ms": self.rtt_ms}
        try:
            info, text = await self._first_token(backend, req)
        except E.BackendError as err:
            self._error_check("ttft", "TTFT", err, "the TTFT request", data)
            return
        except TimeoutError:
            self.add(
                "ttft",
                "TTFT",
                FAIL,
                f"no token within {self.timeout_s:g} s",
                "The model did not start answering; try again, pick a faster model, or use local mode.",
                data,
            )
            return
        data["trace_id"] = info.trace_id
        ttft = info.ttft_ms
        if ttft is None or not text:
            headers_ms = _ms(info.headers_at - info.sent_at) if info.headers_at else None
            data["headers_ms"] = headers_ms
            self.add(
                "ttft",
                "TTFT",
                WARN,
                "the answer had no text" + (f" (headers after {headers_ms:.0f} ms)" if headers_ms is not None else ""),
                "The model returned an empty completion for a tiny prompt; check the model name and "
                "that it is a code or instruct model.",
                data,
            )
            return
        ttft = round(ttft, 1)
        data["ttft_ms"] = ttft
        rtt = self.rtt_ms
        rtt_note = f" (network round trip {rtt:.0f} ms)" if rtt is not None else ""
        value = f"{ttft:.0f} ms to the first token{rtt_note}, strategy {strategy}"
        if ttft <= SLOW_TTFT_MS:
            self.add("ttft", "TTFT", OK, value, "", data)
            return
        if rtt is not None and rtt >= 0.5 * ttft:
            data["likely_cause"] = "network"
            fix = (
                f"Above {SLOW_TTFT_MS:.0f} ms, and most of it is the network round trip ({rtt:.0f} ms): check "
                f"your connection or proxy, use a nearer host, or use local mode."
            )
        else:
            data["likely_cause"] = "model"
            server = ttft - (rtt or 0.0)
            fix = (
                f"Above {SLOW_TTFT_MS:.0f} ms, and the network round trip is only {rtt or 0:.0f} ms, so the model "
                f"takes about {server:.0f} ms to start: pick a smaller or less busy model, or use local mode."
            )
        self.add("ttft", "TTFT", WARN, value, fix, data)
