"""Providers, keys, headers and proxies (issue 15): SiliconFlow's shape only for
SiliconFlow, a key for every backend kind, custom headers, the ``user`` field, and the
proxy variables (never for loopback). Real stdio, the simulator over loopback HTTP, and a
small recording HTTP proxy built on asyncio streams; the settings alone are
tests/unit/test_providers.py."""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend
from sidecar.providers import SILICONFLOW

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-providers-0123456789"
LOCAL_KEY = "sk-test-local-engine-98765"
INIT = {"debounceMinMs": 0, "debounceMaxMs": 0}
URI = "file:///w/p.py"
_PROXY_VARS = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


def clean_env(tmp_path, **env):
    e = sidecar_env(tmp_path, SIDECAR_CACHE="false", **env)
    for k in _PROXY_VARS:
        if k not in env:
            e.pop(k, None)
    return e


async def ask(client, line=1, col=4):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, line, col)), 20)


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=500, seed=1), api_key=KEY) as s:
        s.set_responder(lambda body: "w * h")
        yield s


# --------------------------------------------------------------------------- LSP
async def test_openai_compatible_url_with_a_key_gets_the_openai_shape_and_the_key(tmp_path, sim):
    env = clean_env(
        tmp_path,
        SIDECAR_API_KEY=KEY,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_USER="alice@team",
        SIDECAR_HEADERS=json.dumps({"X-Team": "infra"}),
    )
    async with sidecar(env, init_options={**INIT, "headers": {"X-From-Editor": "1"}}) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        r = await ask(client)
        await asyncio.sleep(0.1)
        status = [s for s in client.sidecar_status if s.get("provider")]
    assert r is not None and r.items[0].insert_text == "w * h"  # the simulator checked the key (401 otherwise)
    req = [x for x in sim.requests if x.path.endswith("/completions")][0]
    # Not SiliconFlow's shape (its native FIM ``suffix`` and its default model): a plain
    # OpenAI completions body for the server's own model.
    assert "suffix" not in req.body and req.body["prompt"] == "def area(w, h):\n    "
    assert req.body["model"] == "default"
    assert req.auth_scheme == "Bearer"
    assert req.body["user"] == "alice@team"
    # initializationOptions are a layer above the environment: its table replaces SIDECAR_HEADERS'.
    assert req.headers.get("x-from-editor") == "1"
    assert status and status[-1]["provider"] == "openai"


def log_records(tmp_path) -> list[dict]:
    path = tmp_path / "state" / "sidecar" / "log" / "sidecar.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_siliconflow_key_with_a_self_hosted_url_gets_the_openai_shape(tmp_path, sim):
    # (a) The key comes from SILICONFLOW_API_KEY, the base URL is not a SiliconFlow host,
    # provider auto: the OpenAI shape, the key still sent, and the log says how to force
    # SiliconFlow's shape.
    env = clean_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_PROVIDER="auto")
    async with sidecar(env, init_options=INIT) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        r = await ask(client)
        await asyncio.sleep(0.1)
        status = [s for s in client.sidecar_status if s.get("provider")]
    assert r is not None and r.items[0].insert_text == "w * h"  # the simulator checked the key (401 otherwise)
    req = [x for x in sim.requests if x.path.endswith("/completions")][0]
    assert req.path == "/v1/completions" and req.auth_scheme == "Bearer"
    assert "suffix" not in req.body and req.body["prompt"] == "def area(w, h):\n    "
    assert req.body["model"] == "default"
    assert status and status[-1]["provider"] == "openai"
    notes = [x["msg"] for x in log_records(tmp_path) if "SIDECAR_PROVIDER=siliconflow" in x["msg"]]
    assert notes and "OpenAI-compatible shape" in notes[0] and "127.0.0.1" in notes[0] and KEY not in notes[0]


async def test_siliconflow_provider_named_sends_siliconflows_shape_anywhere(tmp_path, sim):
    # (b) The same with SIDECAR_PROVIDER=siliconflow: SiliconFlow's native FIM shape and
    # default model go to the stand-in, and no note is logged.
    env = clean_env(tmp_path, SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_PROVIDER="siliconflow")
    async with sidecar(env, init_options=INIT) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        r = await ask(client)
        await asyncio.sleep(0.1)
        status = [s for s in client.sidecar_status if s.get("provider")]
    assert r is not None and r.items[0].insert_text == "w * h"
    req = [x for x in sim.requests if x.path.endswith("/completions")][0]
    assert req.body["prompt"] == "def area(w, h):\n    " and req.body["suffix"] == "\n"
    assert req.body["model"] == SILICONFLOW.default_model and req.auth_scheme == "Bearer"
    assert status and status[-1]["provider"] == "siliconflow"
    assert not [x for x in log_records(tmp_path) if "SIDECAR_PROVIDER=siliconflow" in x["msg"]]


async def test_custom_headers_from_the_environment_reach_the_backend(tmp_path, sim):
    env = clean_env(
        tmp_path,
        SIDECAR_API_KEY=KEY,
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_HEADERS=json.dumps({"X-Team": "infra", "OpenAI-Organization": "org-1"}),
    )
    async with sidecar(env, init_options=INIT) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        assert await ask(client) is not None
    req = [x for x in sim.requests if x.path.endswith("/completions")][0]
    assert req.headers["x-team"] == "infra" and req.headers["openai-organization"] == "org-1"
    assert "user" not in req.body


@pytest.mark.parametrize("engine, path", [("llama-server", "/infill"), ("ollama", "/api/generate")])
async def test_local_engines_send_their_own_key_and_headers(tmp_path, engine, path):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=20, tokens_per_s=500, seed=1), api_key=LOCAL_KEY) as sim:
        sim.set_responder(lambda body: "w * h")
        env = clean_env(
            tmp_path,
            SIDECAR_MODE="local",
            SIDECAR_LOCAL_ENGINE=engine,
            SIDECAR_LOCAL_URL=sim.url,
            SIDECAR_LOCAL_MODEL="qwen2.5-coder:1.5b",
            SIDECAR_LOCAL_API_KEY=LOCAL_KEY,
            SIDECAR_LOCAL_HEADERS=json.dumps({"X-Node": "gpu-3"}),
            SIDECAR_HEADERS=json.dumps({"X-Cloud-Only": "1"}),
        )
        async with sidecar(env, init_options=INIT) as client:
            open_doc(client, URI, "def area(w, h):\n    \n")
            r = None
            for _ in range(20):  # the first request may wait for the engine's readiness check
                r = await ask(client)
                if r is not None:
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.1)
            messages = [m.message for m in client.messages]
        reqs = [
            x
            for x in sim.requests
            if x.path == path and x.body and (x.body.get("prompt") or x.body.get("input_prefix"))
        ]
    assert r is not None and r.items[0].insert_text == "w * h", messages  # the simulator checked the key
    assert reqs and all(x.auth_scheme == "Bearer" for x in reqs)
    assert reqs[0].headers["x-node"] == "gpu-3" and "x-cloud-only" not in reqs[0].headers
    assert "user" not in reqs[0].body


# --------------------------------------------------------------------------- proxy
class RecordingProxy:
    """An HTTP forward proxy that answers every request itself and records the request
    lines (absolute-form for a proxied plain-HTTP request, RFC 9112 §3.2.2) and headers."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.bodies: list[bytes] = []  # one per request, in the same order
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> RecordingProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, _, v = line.partition(":")
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                self.requests.append((lines[0], headers))
                self.bodies.append(body)
                if lines[0].startswith("POST"):
                    payload = {"choices": [{"index": 0, "text": "w * h", "finish_reason": "stop"}]}
                    out = f"data: {json.dumps(payload)}\n\ndata: [DONE]\n\n".encode()
                    ctype = "text/event-stream"
                else:
                    out, ctype = b'{"object": "list", "data": []}', "application/json"
                writer.write(
                    f"HTTP/1.1 200 OK\r\nContent-Type: {ctype}\r\nContent-Length: {len(out)}\r\n\r\n".encode() + out
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


BACKEND = "http://backend.sidecar-test.invalid/v1"  # RFC 2606: never resolves


async def test_proxy_variables_are_honoured(tmp_path):
    async with RecordingProxy() as proxy:
        env = clean_env(tmp_path, SIDECAR_API_KEY=KEY, SIDECAR_BASE_URL=BACKEND, HTTP_PROXY=proxy.url)
        async with sidecar(env, init_options=INIT) as client:
            open_doc(client, URI, "def area(w, h):\n    \n")
            r = await ask(client)
    posts = [line for line, _h in proxy.requests if line.startswith("POST")]
    assert posts == ["POST http://backend.sidecar-test.invalid/v1/completions HTTP/1.1"]
    assert r is not None and r.items[0].insert_text == "w * h"


LOOK_ALIKE = "http://api.siliconflow.cn.sidecar-test.invalid/v1"  # SiliconFlow's host as a prefix only


async def test_look_alike_host_gets_the_openai_shape_even_with_a_siliconflow_key(tmp_path):
    # (c) A host that only starts with SiliconFlow's name is not SiliconFlow: the request
    # (recorded by the proxy, the host never resolves) has the OpenAI shape and the key.
    async with RecordingProxy() as proxy:
        env = clean_env(
            tmp_path,
            SILICONFLOW_API_KEY=KEY,
            SIDECAR_BASE_URL=LOOK_ALIKE,
            HTTP_PROXY=proxy.url,
            SIDECAR_PROVIDER="auto",
        )
        async with sidecar(env, init_options=INIT) as client:
            open_doc(client, URI, "def area(w, h):\n    \n")
            r = await ask(client)
    posts = [(line, h, json.loads(b)) for (line, h), b in zip(proxy.requests, proxy.bodies) if line.startswith("POST")]
    assert r is not None and r.items[0].insert_text == "w * h"
    assert [p[0] for p in posts] == [f"POST {LOOK_ALIKE}/completions HTTP/1.1"]
    _line, headers, body = posts[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert "suffix" not in body and body["model"] == "default" and body["prompt"] == "def area(w, h):\n    "


async def test_proxy_variables_can_be_turned_off_and_never_apply_to_loopback(tmp_path, sim):
    async with RecordingProxy() as proxy:
        env = clean_env(
            tmp_path,
            SIDECAR_API_KEY=KEY,
            SIDECAR_BASE_URL=BACKEND,
            HTTP_PROXY=proxy.url,
            SIDECAR_TRUST_ENV="0",
            SIDECAR_REQUEST_TIMEOUT_MS="1500",
        )
        async with sidecar(env, init_options=INIT) as client:
            open_doc(client, URI, "def area(w, h):\n    \n")
            off = await ask(client)
        # A loopback backend with the proxy variables set: straight to it.
        env = clean_env(
            tmp_path,
            SIDECAR_API_KEY=KEY,
            SIDECAR_BASE_URL=sim.base_url,
            HTTP_PROXY=proxy.url,
            HTTPS_PROXY=proxy.url,
            ALL_PROXY=proxy.url,
        )
        async with sidecar(env, init_options=INIT) as client:
            open_doc(client, URI, "def area(w, h):\n    \n")
            direct = await ask(client)
    assert off is None and proxy.requests == []
    assert direct is not None and direct.items[0].insert_text == "w * h"


# --------------------------------------------------------------------------- a rejected key
@pytest.mark.parametrize(
    "key_var, provider, names, not_named",
    [
        ("SIDECAR_API_KEY", "auto", "Check SIDECAR_API_KEY", ("SILICONFLOW_API_KEY", ".cn keys")),
        ("OPENAI_API_KEY", "auto", "Check OPENAI_API_KEY", ("SILICONFLOW_API_KEY", ".cn keys")),
        (
            "SILICONFLOW_API_KEY",
            "siliconflow",
            "Check SILICONFLOW_API_KEY, and that the key belongs to this host (.cn",
            (),
        ),
    ],
    ids=["openai-sidecar-key", "openai-openai-key", "siliconflow"],
)
async def test_a_rejected_key_names_the_variable_and_provider_in_use(
    tmp_path, sim, key_var, provider, names, not_named
):
    # The simulator wants KEY; the sidecar sends another key: HTTP 401.
    env = clean_env(
        tmp_path, **{key_var: "sk-not-the-servers-key-4242"}, SIDECAR_BASE_URL=sim.base_url, SIDECAR_PROVIDER=provider
    )
    async with sidecar(env, init_options=INIT) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        r = await ask(client)
        await asyncio.sleep(0.2)
        messages = [m.message for m in client.messages]
    assert r is None
    rejected = [m for m in messages if "rejected the API key (HTTP 401)" in m]
    assert len(rejected) == 1, messages
    assert names in rejected[0], rejected
    assert not [w for w in not_named if w in rejected[0]], rejected
