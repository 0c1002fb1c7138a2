"""The cloud checks' driver and the ``key`` check.

:meth:`CloudChecks.check_cloud` opens one HTTP client on the base URL and runs, in order,
``network`` (network.py), ``key`` (here), then ``fim`` (fim.py) and ``ttft`` (ttft.py) on
the backend the sidecar would build; each later check is SKIPped with the reason when an
earlier one rules it out (no base URL, host unreachable, key rejected, FIM probe failed).

``key`` judges the answer to ``GET {base}/models`` (sent by the network check, with the
key): how many models are listed and whether the configured model is one of them. FAIL:
the key was rejected (or the server wants one). WARN: no model list (HTTP 404/405, or not
JSON), another HTTP error, or the configured model is not listed. See
docs/architecture.md (``backends/``, ``tools/``).
"""

from __future__ import annotations

import httpx2 as httpx

from .base import FAIL, OK, SKIP, WARN, _CheckMixin, _host_of


class CloudChecks(_CheckMixin):
    """``check_cloud`` and ``check_key``, methods of :class:`~sidecar.tools.doctor.core.Doctor`."""

    async def check_cloud(self) -> None:
        s = self.settings
        assert s is not None
        base = s.resolved_base_url
        if not base:
            for key, title in (("network", "base URL"), ("key", "API key"), ("fim", "FIM"), ("ttft", "TTFT")):
                self.add(key, title, SKIP, "skipped: no base URL is configured")
            return
        limits = httpx.Limits(max_connections=4, max_keepalive_connections=2)
        timeout = httpx.Timeout(self.timeout_s, connect=min(self.timeout_s, max(s.connect_timeout_ms / 1000, 1.0)))
        async with httpx.AsyncClient(
            base_url=base + "/",
            headers={"User-Agent": "sidecar-doctor/0.1"},
            http1=True,
            http2=s.http2,
            timeout=timeout,
            limits=limits,
            trust_env=False,
        ) as client:
            resp = await self.check_network(client, base)
            if resp is None:
                why = f"skipped: {_host_of(base)} is unreachable"
                for key, title in (("key", "API key"), ("fim", "FIM"), ("ttft", "TTFT")):
                    self.add(key, title, SKIP, why)
                return
            self.cloud_usable = self.check_key(resp)
        if not self.cloud_usable:
            for key, title in (("fim", "FIM"), ("ttft", "TTFT")):
                self.add(key, title, SKIP, "skipped: the API key was rejected")
            return
        from ...backends.factory import build_cloud

        backend = build_cloud(s)
        try:
            await self.check_fim(backend)
            if self.checks[-1].status == FAIL:  # the same request would fail the same way
                self.add("ttft", "TTFT", SKIP, "skipped: see the FIM check")
            else:
                await self.check_ttft(backend)
        finally:
            await backend.aclose()

    def check_key(self, resp: httpx.Response) -> bool:
        """Judge the key from the ``GET /models`` answer. Returns False only when the key
        was rejected."""
        from ...backends.errors import BAD_KEY, classify
        from ...backends.factory import cloud_key_hint

        s = self.settings
        assert s is not None
        cloud = s.cloud
        name = cloud.label if cloud is not None and cloud.hosts else f"the server at {s.resolved_base_url}"
        model = s.resolved_model
        key_word = "key accepted" if s.api_key else "no key needed"
        if resp.status_code >= 400:
            err = classify(resp.status_code, resp.content, backend=name, model=model, key_hint=cloud_key_hint(s))
            data = {"status": resp.status_code, "kind": err.kind}
            if err.kind == BAD_KEY:
                value = (
                    f"the key was rejected (HTTP {resp.status_code})"
                    if s.api_key
                    else f"the server wants an API key (HTTP {resp.status_code})"
                )
                self.add("key", "API key", FAIL, value, err.message, data)
                return False
            if resp.status_code in (404, 405):
                self.add(
                    "key",
                    "API key",
                    WARN,
                    f"no model list (GET /models: HTTP {resp.status_code})",
                    "The server has no /models endpoint, so the key and model could not be checked; "
                    "make sure the base URL is the API base (ending in /v1).",
                    data,
                )
                return True
            self.add("key", "API key", WARN, f"GET /models: HTTP {resp.status_code}", err.message, data)
            return True
        try:
            payload = resp.json()
            ids = [m["id"] for m in payload["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, KeyError, TypeError):
            ctype = resp.headers.get("content-type", "").split(";")[0] or "no content type"
            self.add(
                "key",
                "API key",
                WARN,
                f"{key_word}, but /models answered {ctype}, not a model list",
                "Make sure the base URL is an OpenAI-compatible API base (ending in /v1).",
                {"status": resp.status_code},
            )
            return True
        listed = model in ids
        data = {"status": resp.status_code, "models": len(ids), "model_listed": listed}
        value = f"{key_word}; {len(ids)} model{'' if len(ids) == 1 else 's'} listed, '{model}' " + (
            "listed" if listed else "not listed"
        )
        if listed:
            self.add("key", "API key", OK, value, "", data)
        else:
            examples = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
            self.add(
                "key",
                "API key",
                WARN,
                value,
                f"Set SIDECAR_MODEL to a model the server lists ({examples})."
                if ids
                else "The server lists no models; check that it has one loaded.",
                data,
            )
        return True
