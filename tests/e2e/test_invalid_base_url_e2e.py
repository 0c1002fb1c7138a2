"""An invalid base URL never sends the key anywhere else (README "Security": the API key
is sent only to the configured backend). A base URL with a typo in its scheme
(``htps://``) or another scheme (``ftp://``), from any layer, leaves no cloud backend: not
SiliconFlow's default host, not a lower layer's base URL, not ``OPENAI_BASE_URL``; one
message names the URL and what to do. In a live reload a valid base URL in use is kept.

Real stdio; a local TCP listener stands in as the proxy (``HTTPS_PROXY``,
``HTTP_PROXY``, ``ALL_PROXY``) and records every connection, so a request to any
non-loopback host (``CONNECT api.siliconflow.cn:443``) shows; the simulator on loopback
plays the backends a key could wrongly reach.
"""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(120)

KEY = "sk-private-gateway-key-0123456789"
BAD_URL = "htps://my-private-gw.example/v1"
URI = "file:///w/p.py"
_ENV_VARS = (
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


class Listener:
    """A TCP listener on loopback that records what every connection sends (a proxy's
    ``CONNECT host:443`` line, or a whole plain-HTTP request with its headers) and
    refuses it (HTTP 403)."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self._server: asyncio.AbstractServer | None = None

    async def __aenter__(self) -> Listener:
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
        data = b""
        try:
            data = await asyncio.wait_for(reader.read(65536), 5)
            writer.write(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
        except (TimeoutError, ConnectionError):
            pass
        finally:
            self.received.append(data)
            writer.close()


def env_with(tmp_path, proxy: Listener, **env: str) -> dict[str, str]:
    e = sidecar_env(tmp_path, SIDECAR_CACHE="false", SIDECAR_REQUEST_TIMEOUT_MS="2000", **env)
    for k in _ENV_VARS:
        if k not in env:
            e.pop(k, None)
    e.update(HTTPS_PROXY=proxy.url, HTTP_PROXY=proxy.url, ALL_PROXY=proxy.url)
    return e


async def cmd(client, name, *args):
    return await asyncio.wait_for(
        client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args))), 30
    )


async def one_request(env, init_options=None, settle_s=1.0):
    """One session with one completion request: (status, messages shown)."""
    async with sidecar(env, init_options=init_options) as client:
        open_doc(client, URI, "def area(w, h):\n    \n")
        await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 30)
        await asyncio.sleep(settle_s)  # a prewarm or a late stream would have reached the proxy by now
        status = (await cmd(client, "sidecar.stats"))["status"]
        messages = [m.message for m in client.messages]
    return status, messages


def assert_no_cloud(proxy: Listener, status: dict, messages: list[str], url: str, source: str) -> None:
    # Nothing left through the proxy: no CONNECT api.siliconflow.cn:443, no request with the key.
    assert proxy.received == [], proxy.received
    assert status["side"] == "local" and status["provider"] == "local", status
    assert "siliconflow" not in status["backend"].lower(), status
    # One message: the bad URL, where it came from, that there is no cloud backend and what to do.
    about = [m for m in messages if url in m]
    assert len(about) == 1, messages
    assert source in about[0] and "no cloud backend" in about[0] and "http:// or https://" in about[0], about
    assert "using the previous or default value" not in about[0], about
    assert KEY not in " ".join(messages)


async def test_a_typo_in_the_environments_base_url_sends_the_key_nowhere(tmp_path):
    async with Listener() as proxy:
        env = env_with(
            tmp_path,
            proxy,
            SIDECAR_BASE_URL=BAD_URL,
            SIDECAR_API_KEY=KEY,
            SIDECAR_LOG_FILE=str(tmp_path / "sidecar.jsonl"),
        )
        status, messages = await one_request(env)
    assert_no_cloud(proxy, status, messages, BAD_URL, "SIDECAR_BASE_URL")
    assert KEY not in (tmp_path / "sidecar.jsonl").read_text(encoding="utf-8")


@pytest.fixture
async def local_sim():
    """A llama-server on loopback as the local engine, so that a session without a cloud
    backend serves from it (and shows whether the cloud key reached it)."""
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as s:
        s.set_responder(lambda body: "w * h")
        yield s


def local_engine(sim) -> dict[str, str]:
    return dict(SIDECAR_LOCAL_ENGINE="llama-server", SIDECAR_LOCAL_URL=sim.url)


async def test_a_config_files_ftp_base_url_with_the_key_in_the_environment(tmp_path, local_sim):
    bad = "ftp://my-private-gw.example/v1"
    (tmp_path / "config.toml").write_text(f'base_url = "{bad}"\nmax_tokens = 17\n')
    async with Listener() as proxy:
        env = env_with(tmp_path, proxy, SIDECAR_API_KEY=KEY, **local_engine(local_sim))
        status, messages = await one_request(env)
    assert_no_cloud(proxy, status, messages, bad, "config file")
    # The local engine serves, the rest of the file stands, and the cloud key never went there.
    reqs = [r for r in local_sim.requests if r.body and r.body.get("input_prefix") is not None]
    assert reqs and reqs[0].body["n_predict"] == 17, [r.path for r in local_sim.requests]
    assert not any(r.auth_present for r in local_sim.requests)


async def test_no_other_layers_base_url_gets_the_key(tmp_path, local_sim):
    # A valid URL below the invalid one is another host: neither OPENAI_BASE_URL (read
    # only when SIDECAR_BASE_URL is unset) nor the environment's URL under a bad one in
    # initializationOptions gets the key.
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as other:
        other.set_responder(lambda body: "leaked")
        async with Listener() as proxy:
            env = env_with(
                tmp_path,
                proxy,
                SIDECAR_BASE_URL=BAD_URL,
                OPENAI_BASE_URL=other.base_url,
                SIDECAR_API_KEY=KEY,
                **local_engine(local_sim),
            )
            status, messages = await one_request(env)
            assert_no_cloud(proxy, status, messages, BAD_URL, "SIDECAR_BASE_URL")
            env = env_with(
                tmp_path, proxy, SIDECAR_BASE_URL=other.base_url, SIDECAR_API_KEY=KEY, **local_engine(local_sim)
            )
            status, messages = await one_request(env, init_options={"baseUrl": "ftp://gw.example/v1"})
            assert_no_cloud(proxy, status, messages, "ftp://gw.example/v1", "initializationOptions")
        assert other.requests == []


async def test_a_live_reload_keeps_a_valid_url_and_never_falls_back_to_siliconflow(tmp_path, local_sim):
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1), api_key=KEY) as cloud:
        cloud.set_responder(lambda body: "w * h")
        async with Listener() as proxy:
            # (1) A valid base URL in use: a bad one from the editor keeps it (the key still
            # goes only there).
            env = env_with(tmp_path, proxy, SIDECAR_BASE_URL=cloud.base_url, SIDECAR_API_KEY=KEY)
            async with sidecar(env) as client:
                client.workspace_did_change_configuration(
                    types.DidChangeConfigurationParams(settings={"sidecar": {"baseUrl": BAD_URL, "maxTokens": 19}})
                )
                await asyncio.sleep(0.3)
                open_doc(client, URI, "def area(w, h):\n    \n")
                kept = await asyncio.wait_for(
                    client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 30
                )
                kept_messages = [m.message for m in client.messages]
            # (2) No valid base URL in use (local mode, the key alone would mean SiliconFlow):
            # a bad one with cloud mode from the editor leaves no cloud backend.
            env = env_with(tmp_path, proxy, SIDECAR_API_KEY=KEY, SIDECAR_MODE="local", **local_engine(local_sim))
            async with sidecar(env) as client:
                client.workspace_did_change_configuration(
                    types.DidChangeConfigurationParams(settings={"sidecar": {"baseUrl": BAD_URL, "mode": "cloud"}})
                )
                await asyncio.sleep(0.3)
                open_doc(client, URI, "def area(w, h):\n    \n")
                await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 30)
                await asyncio.sleep(1.0)
                status = (await cmd(client, "sidecar.stats"))["status"]
                messages = [m.message for m in client.messages]
        assert kept is not None and kept.items[0].insert_text == "w * h"
        bodies = [r.body for r in cloud.requests if r.path.endswith("/completions")]
        assert bodies and bodies[-1]["max_tokens"] == 19  # the rest of the change applies
        assert [m for m in kept_messages if BAD_URL in m and "kept the previous value" in m], kept_messages
    assert_no_cloud(proxy, status, messages, BAD_URL, "didChangeConfiguration")
