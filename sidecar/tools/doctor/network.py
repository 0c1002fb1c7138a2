"""The ``network`` check: two ``GET {base}/models`` (with the key, if any) on the client
:meth:`~sidecar.tools.doctor.cloud.CloudChecks.check_cloud` opened: the first on a new
connection (TCP connect, TLS handshake for https, first request), the second on the
kept-alive one (the warm round trip, kept as ``rtt_ms`` for the TTFT check). All times
are milliseconds, from httpx's connection trace.

FAIL: the host cannot be reached (the cause names the OS error: refused, DNS, timeout).
WARN: the warm round trip is above ``SLOW_RTT_MS`` (500 ms). See docs/architecture.md
(``tools/``).
"""

from __future__ import annotations

import asyncio
import time

import httpx2 as httpx

from .base import FAIL, OK, WARN, _cause, _CheckMixin, _host_of, _ms

SLOW_RTT_MS = 500.0


class NetworkCheck(_CheckMixin):
    """``check_network``, a method of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def _timed_get(
        self, client: httpx.AsyncClient, path: str, headers: dict[str, str] | None = None
    ) -> tuple[httpx.Response, dict[str, float]]:
        """GET ``path``; returns the response and phase times in ms (``connect``, ``tls``,
        ``request``: from sending the request to the end of the body, ``total``)."""
        marks: dict[str, float] = {}

        async def trace(name: str, _info: dict) -> None:
            marks.setdefault(name, time.perf_counter())

        t0 = time.perf_counter()
        resp = await asyncio.wait_for(client.get(path, headers=headers, extensions={"trace": trace}), self.timeout_s)
        t1 = time.perf_counter()
        phases: dict[str, float] = {"total": _ms(t1 - t0)}

        def span(step: str) -> float | None:
            a = marks.get(f"connection.{step}.started")
            b = marks.get(f"connection.{step}.complete")
            return _ms(b - a) if a is not None and b is not None else None

        connect, tls = span("connect_tcp"), span("start_tls")
        if connect is not None:
            phases["connect"] = connect
        if tls is not None:
            phases["tls"] = tls
        sent = next(
            (
                marks[k]
                for k in ("http11.send_request_headers.started", "http2.send_request_headers.started")
                if k in marks
            ),
            None,
        )
        phases["request"] = _ms(t1 - sent) if sent is not None else phases["total"]
        return resp, phases

    async def check_network(self, client: httpx.AsyncClient, base: str) -> httpx.Response | None:
        """Two ``GET /models`` (with the key, if any): on a new connection, then on the
        kept-alive one. Returns the second response (for :meth:`check_key`), or None when
        the host cannot be reached."""
        s = self.settings
        assert s is not None
        host = _host_of(base)
        headers = {"Authorization": f"Bearer {s.api_key}"} if s.api_key else None
        try:
            _cold, p1 = await self._timed_get(client, "models", headers)
            warm, p2 = await self._timed_get(client, "models", headers)
        except (TimeoutError, httpx.HTTPError, OSError) as exc:
            self.add(
                "network",
                "base URL",
                FAIL,
                f"cannot reach {host}: {_cause(exc)}",
                f"Check the base URL ({base}), your network connection, proxy or firewall.",
                {"host": host, "base_url": base, "error": _cause(exc)},
            )
            return None
        self.rtt_ms = p2["request"]
        https = base.startswith("https://")
        data = {
            "host": host,
            "base_url": base,
            "connect_ms": p1.get("connect"),
            "tls_ms": p1.get("tls") if https else None,
            "first_request_ms": p1["request"],
            "round_trip_ms": self.rtt_ms,
            "status": warm.status_code,
        }
        parts = []
        if p1.get("connect") is not None:
            parts.append(f"connect {p1['connect']:.0f} ms")
        if https:
            parts.append(f"TLS {p1['tls']:.0f} ms" if p1.get("tls") is not None else "TLS n/a")
        parts.append(f"first request {p1['request']:.0f} ms, round trip {self.rtt_ms:.0f} ms (GET /models)")
        value = f"{host}: " + ", ".join(parts)
        if self.rtt_ms > SLOW_RTT_MS:
            self.add(
                "network",
                "base URL",
                WARN,
                value,
                f"The network round trip to {host} is slow; every completion pays it at least once, so "
                f"check your connection or proxy, or use a nearer host (or local mode).",
                data,
            )
        else:
            self.add("network", "base URL", OK, value, "", data)
        return warm
