"""The real code model (Qwen2.5-Coder-0.5B, fetched by ``sidecar model pull``) through
``sidecar serve`` over real stdio, from a cold start: ``local_model = "auto"`` picks it,
the engine loads it, and the answer is the model's fill-in-the-middle text.

Skipped where the model is not installed, except with ``SIDECAR_REQUIRE_CODE_MODEL=1``
(CI sets it: ``scripts/setup`` fetches the model there), where that is a failure.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from sidecar.models import catalog, store

pytestmark = pytest.mark.timeout(300)

CODE_MODEL = "qwen2.5-coder-0.5b"

# A real file's shape: the hole is mid-word in the last line, and the suffix (two more
# functions) follows the cursor, as in an editor.
PREFIX = '''import json
from pathlib import Path


def load_settings(path):
    """Read a JSON settings file and return it as a dict."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def save_settings(path, settings):
    """Write settings as JSON, indented."""
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=2)


def main():
    settings = load_sett'''
SUFFIX = """
    settings["runs"] = settings.get("runs", 0) + 1
    save_settings("settings.json", settings)
"""


def require_code_model() -> None:
    if store.installed_path(catalog.get(CODE_MODEL)) is not None:
        return
    reason = f"{CODE_MODEL} is not installed (run `sidecar model pull {CODE_MODEL}`)"
    if os.environ.get("SIDECAR_REQUIRE_CODE_MODEL") == "1":
        pytest.fail(f"{reason} (SIDECAR_REQUIRE_CODE_MODEL=1)")
    pytest.skip(reason)


async def final_text(client, uri: str, first: str, timeout_s: float = 120.0) -> str:
    """The suggestion's final text: the last update for ``uri`` once one says done, else
    the first answer when the stream ended without updates."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ups = [u for _, u in client.sidecar_updates if u["uri"] == uri]
        if ups and ups[-1]["done"]:
            items = ups[-1]["items"]
            return items[0]["insertText"] if items else ""
        st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
        if not ups and first and st["runtime"]["active_streams"] == 0:
            return first
        await asyncio.sleep(0.2)
    raise AssertionError(f"no final suggestion within {timeout_s} s")


async def test_auto_loads_the_code_model_cold_and_fills_the_middle(tmp_path):
    require_code_model()
    env = sidecar_env(tmp_path, SIDECAR_MODE="local", SIDECAR_LOCAL_MODEL="auto", SIDECAR_CACHE="false")
    uri = "file:///w/settings_tool.py"
    line = PREFIX.count("\n")
    col = len(PREFIX.rsplit("\n", 1)[1])
    async with sidecar(env) as client:
        open_doc(client, uri, PREFIX + SUFFIX)
        t0 = time.monotonic()
        result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, line, col)), 60)
        first = result.items[0].insert_text if result and result.items else ""
        text = await final_text(client, uri, first)
        elapsed = time.monotonic() - t0
        models = {s.get("model") for s in client.sidecar_status}
    assert any(m and "qwen2.5-coder-0.5b" in m.lower() for m in models), models
    # The model completes the identifier and its call; SmolLM2 or a template error would
    # not give this line.
    first_line = text.split("\n")[0]
    assert first_line.startswith("ings("), (text, elapsed)
    assert "load_settings" not in first_line  # the healed prefix is not repeated


async def test_a_code_model_that_is_not_installed_is_refused_with_the_command_to_get_it(tmp_path):
    env = sidecar_env(
        tmp_path,
        SIDECAR_MODE="local",
        SIDECAR_LOCAL_MODEL="qwen2.5-coder-1.5b",
        SIDECAR_MODELS_DIR=str(tmp_path / "no-models"),
    )
    uri = "file:///w/empty.py"
    async with sidecar(env) as client:
        open_doc(client, uri, "def f():\n    return ")
        t0 = time.monotonic()
        result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(uri, 1, 11)), 30)
        elapsed = time.monotonic() - t0
        for _ in range(50):
            if client.messages:
                break
            await asyncio.sleep(0.1)
        messages = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert result is None or not result.items
    assert elapsed < 3.0, elapsed  # answered at once: nothing to wait for
    assert any("sidecar model pull qwen2.5-coder-1.5b" in m for m in messages), messages
