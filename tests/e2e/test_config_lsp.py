"""Configuration layers over real stdio: file < env < initializationOptions < didChangeConfiguration."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=1000, seed=1)) as s:
        s.set_responder(lambda body: "done()")
        yield s


def models_used(sim):
    return [r.body["model"] for r in sim.requests if r.path.endswith("completions")]


async def complete_once(client, uri="file:///w/c.py"):
    return await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 0, 4)), 20)


async def test_precedence_of_layers(tmp_path, sim):
    (tmp_path / "config.toml").write_text(
        f'base_url = "{sim.base_url}"\nmodel = "from-file/starcoder2-3b"\nmax_tokens = 17\n'
    )
    env = sidecar_env(tmp_path, SIDECAR_MODEL="from-env/starcoder2-7b")
    async with sidecar(env, init_options={"sidecar": {"maxTokens": 21}}) as client:
        open_doc(client, "file:///w/c.py", "x = \n")
        await complete_once(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"sidecar": {"model": "from-change/starcoder2-15b"}})
        )
        await asyncio.sleep(0.3)
        await complete_once(client)
    bodies = [r.body for r in sim.requests if r.path.endswith("completions")]
    assert [b["model"] for b in bodies] == ["from-env/starcoder2-7b", "from-change/starcoder2-15b"]
    assert bodies[0]["max_tokens"] == 21  # initializationOptions beat the file's 17
    # A StarCoder model on a generic server gets its FIM template, not a suffix field.
    assert bodies[0]["prompt"].startswith("<fim_prefix>") and "suffix" not in bodies[0]


async def test_invalid_values_are_reported_and_previous_kept(tmp_path, sim):
    env = sidecar_env(tmp_path, SIDECAR_BASE_URL=sim.base_url, SIDECAR_MODEL="m1")
    async with sidecar(env, init_options={"maxTokens": "lots"}) as client:
        open_doc(client, "file:///w/c.py", "x = \n")
        await complete_once(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"sidecar": {"temperature": 9, "model": "m2"}})
        )
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"colour": "blue"}))
        await asyncio.sleep(0.3)
        open_doc(client, "file:///w/d.py", "y = \n")
        result = await complete_once(client, "file:///w/d.py")
        messages = [m.message for m in client.messages]
    assert any("max_tokens" in m and "'lots'" in m and "initializationOptions" in m for m in messages), messages
    assert any("temperature" in m and "between 0 and 2" in m for m in messages), messages
    assert any("unknown setting 'colour'" in m for m in messages), messages
    # The bad value was dropped alone: the model from the same change applies.
    assert models_used(sim) == ["m1", "m2"]
    assert result.items[0].insert_text == "done()"


async def test_one_bad_environment_variable_keeps_the_others(tmp_path, sim):
    env = sidecar_env(tmp_path, SILICONFLOW_API_KEY="sk-x", SIDECAR_BASE_URL=sim.base_url, SIDECAR_MODE="turbo")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/c.py", "x = \n")
        result = await complete_once(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"sidecar": {"apiKey": None, "trace": {"server": "verbose"}}})
        )
        await asyncio.sleep(0.3)
        open_doc(client, "file:///w/d.py", "y = \n")
        again = await complete_once(client, "file:///w/d.py")
        messages = [m.message for m in client.messages]
    assert any("SIDECAR_MODE" in m and "'turbo'" in m for m in messages), messages
    assert result is not None and again is not None  # still on the cloud backend, key intact
    reqs = [r for r in sim.requests if r.path.endswith("completions")]
    assert len(reqs) == 2 and all(r.auth_present for r in reqs)
    assert not any("trace" in m for m in messages)  # editor-only keys are not errors


async def test_provider_setting_from_the_editor_chooses_siliconflows_shape(tmp_path, sim):
    # SILICONFLOW_API_KEY and a loopback base URL with provider auto: the OpenAI shape (a
    # Qwen model on a generic server gets its FIM template, no ``suffix``). Only the
    # provider setting (here from didChangeConfiguration) sends SiliconFlow's native FIM.
    env = sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY="sk-x",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_PROVIDER="auto",
        SIDECAR_MODEL="Qwen/Qwen2.5-Coder-7B-Instruct",
        SIDECAR_CACHE="false",
    )
    async with sidecar(env) as client:
        open_doc(client, "file:///w/c.py", "x = \n")
        first = await complete_once(client)
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"sidecar": {"provider": "siliconflow"}})
        )
        await asyncio.sleep(0.3)
        open_doc(client, "file:///w/d.py", "y = \n")
        second = await complete_once(client, "file:///w/d.py")
        providers = [s["provider"] for s in client.sidecar_status if s.get("provider")]
    assert first is not None and second is not None
    bodies = [r.body for r in sim.requests if r.path.endswith("completions")]
    assert len(bodies) == 2
    assert "suffix" not in bodies[0] and bodies[0]["prompt"].startswith("<|fim_prefix|>")
    assert bodies[1]["prompt"] == "y = " and "suffix" in bodies[1]
    assert providers[0] == "openai" and providers[-1] == "siliconflow"


async def test_invalid_environment_value_is_reported(tmp_path, sim):
    env = sidecar_env(tmp_path, SIDECAR_BASE_URL=sim.base_url, SIDECAR_MAX_TOKENS="-3")
    async with sidecar(env) as client:
        open_doc(client, "file:///w/c.py", "x = \n")
        result = await complete_once(client)
        messages = [m.message for m in client.messages]
    assert any("SIDECAR_MAX_TOKENS" in m and "max_tokens" in m for m in messages), messages
    assert result is not None  # the rest of the environment still applies


async def test_set_mode_cloud_without_key_stays_local(tmp_path):
    async with sidecar(sidecar_env(tmp_path)) as client:
        out = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(command="sidecar.setMode", arguments=["cloud"])
            ),
            20,
        )
    assert out["changed"] is False and out["mode"] == "local"
    assert any("cloud mode needs a cloud backend" in m.message for m in client.messages)
