"""Accepted-and-retained characters over real stdio (completion/retention.py): the
editor inserts an accepted suggestion, runs its accept command, then edits part of it
away; ``sidecar.stats`` counts what is left at both horizons."""

from __future__ import annotations

import asyncio

import pytest
from lsprotocol import types

from conftest import inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)
URI = "file:///w/area.py"
SUGGESTION = "result = 3.14159 * r * r"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=10, tokens_per_s=400, seed=3)) as s:
        yield s


def env_for(tmp_path, sim, **extra):
    # Horizons of 1.5 s and 3 s stand in for 30 s and 2 min.
    return sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY="sk-r",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_PREFETCH="false",
        SIDECAR_RETAINED_SHORT_S="1.5",
        SIDECAR_RETAINED_LONG_S="3",
        **extra,
    )


def edit(client, version, start, end, text, uri=URI):
    """One incremental change: ``start``/``end`` are (line, character) in UTF-16 units."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(*start), end=types.Position(*end)), text=text
                )
            ],
        )
    )


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def suggest(client):
    result = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 20)
    item = result.items[0]
    assert item.insert_text == SUGGESTION
    return item


def retained(snap):
    return {row["after"]: (row["accepted_chars"], row["retained_chars"]) for row in snap["acceptance"]["retained"]}


async def test_edits_after_an_accept_are_counted_at_both_horizons(tmp_path, sim):
    sim.script([SUGGESTION])
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        item = await suggest(client)
        # The editor inserts the suggestion, then runs its command.
        edit(client, 2, (1, 4), (1, 4), item.insert_text)
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=item.command.command, arguments=item.command.arguments)
        )
        # Typing above and before it moves it; it is still all there.
        edit(client, 3, (0, 0), (0, 0), "# area of a circle\n")
        edit(client, 4, (2, 0), (2, 0), "  ")  # now at (2, 6)
        # The user deletes " * r * r" (8 characters) and rewrites "3.14159" as "3.14159".
        edit(client, 5, (2, 6 + 16), (2, 6 + 24), "")
        edit(client, 6, (2, 6 + 9), (2, 6 + 16), "3.14159")
        await asyncio.sleep(2.0)  # past the first horizon
        first = await stats(client)
        # Then deletes "result = " (9 characters) before the second.
        edit(client, 7, (2, 6), (2, 6 + 9), "")
        await asyncio.sleep(2.0)
        second = await stats(client)
    assert first["acceptance"]["accepted_chars"] == len(SUGGESTION) == 24
    # Kept: "result = " (9); " * r * r" deleted, "3.14159" rewritten (not retained).
    assert retained(first) == {"1.5s": (24, 9)}
    assert retained(second) == {"1.5s": (24, 9), "3s": (24, 0)}
    assert second["acceptance"]["following"] == 0


async def test_accept_before_the_insertion_and_a_close_before_the_horizon(tmp_path, sim):
    """An editor may run the accept command before it sends the insertion; a document
    closed before a horizon is measured as it was closed."""
    sim.script([SUGGESTION])
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        item = await suggest(client)
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=item.command.command, arguments=[item.command.arguments[0], 10])
        )
        edit(client, 2, (1, 4), (1, 4), SUGGESTION[:10])  # a partial accept: "result = 3"
        edit(client, 3, (1, 4 + 9), (1, 4 + 10), "")  # the user deletes the "3"
        await asyncio.sleep(0.3)
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=URI))
        )
        await asyncio.sleep(0.3)
        snap = await stats(client)
    assert snap["acceptance"]["accepted_chars"] == 10
    assert retained(snap) == {"1.5s": (10, 9), "3s": (10, 9)}
