"""Member access with the workspace index and the real code model, over real stdio: a
closed module's functions reach the prompt, and after ``alias.`` the engine is made to
start with one of them (the healing grammar's alternation, ``healing/plan.py``).

The module's names are ones no model would guess (``zq_...``), so a suggestion that
starts with one of them came from the index. Skipped where the code model is not
installed, except with ``SIDECAR_REQUIRE_CODE_MODEL=1`` (CI), where that is a failure.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig
from test_code_model_e2e import final_text, require_code_model

from conftest import client_capabilities, inline_params, make_client, open_doc, sidecar_env

pytestmark = pytest.mark.timeout(300)

HELPERS = '''"""Splitting and joining of header blocks."""


def zq_split_parts(raw, sep=","):
    return [p.strip() for p in raw.split(sep)]


def zq_join_parts(parts, sep=", "):
    return sep.join(parts)


class ZqBlock:
    pass
'''
MAIN_BEFORE = '''from pkg import zqtools as zt


def handle(raw):
    """Split a raw header value and join it again, normalized."""
    parts = zt.'''
MAIN_AFTER = """
    return parts
"""


async def _run(tmp_path: Path, index: bool) -> str:
    root = tmp_path / ("on" if index else "off")
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "zqtools.py").write_text(HELPERS)
    main = root / "app.py"
    main.write_text(MAIN_BEFORE + MAIN_AFTER)
    env = sidecar_env(tmp_path, SIDECAR_MODE="local", SIDECAR_LOCAL_MODEL="auto", SIDECAR_CACHE="false")
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=env, client_factory=make_client
    )
    client = await config.start()
    await client.initialize_session(
        types.InitializeParams(
            capabilities=client_capabilities(),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options={"workspace_index": index, "gate_enabled": False, "request_timeout_ms": 60000},
        )
    )
    try:
        deadline = time.monotonic() + 30
        while index and time.monotonic() < deadline:
            st = await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))
            if st.get("workspace_index", {}).get("state") == "ready":
                break
            await asyncio.sleep(0.1)
        uri = main.as_uri()
        open_doc(client, uri, MAIN_BEFORE + MAIN_AFTER)
        line = MAIN_BEFORE.count("\n")
        col = len(MAIN_BEFORE.rsplit("\n", 1)[1])
        result = await asyncio.wait_for(
            client.text_document_inline_completion_async(inline_params(uri, line, col)), 120
        )
        first = result.items[0].insert_text if result and result.items else ""
        return await final_text(client, uri, first)
    finally:
        await client.shutdown_session()
        await client.stop()


async def test_after_a_module_alias_the_suggestion_starts_with_one_of_its_names(tmp_path):
    require_code_model()
    text = await _run(tmp_path, index=True)
    first_line = text.split("\n")[0]
    assert re.match(r"(zq_split_parts|zq_join_parts|ZqBlock)\b", first_line), text


async def test_without_the_index_the_closed_module_is_unknown(tmp_path):
    """The same request with ``workspace_index = false``: the model never saw the module,
    so the ``zq_`` names cannot come (what makes the test above able to fail)."""
    require_code_model()
    text = await _run(tmp_path, index=False)
    assert "zq_" not in text.split("\n")[0], text
