"""Bad accept commands over real stdio (acceptance.py, retention.py): each is answered,
logged at most as one warning, counted truthfully, and the session serves on.

A simulated cloud over real HTTP on loopback gives one suggestion; the client then
sends accept commands an editor or a plugin bug could send.
"""

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
        s.script([SUGGESTION] * 4)
        yield s


def env_for(tmp_path, sim):
    return sidecar_env(
        tmp_path,
        SILICONFLOW_API_KEY="sk-accept-faults",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_PREFETCH="false",
        SIDECAR_CACHE="false",
        SIDECAR_RETAINED_SHORT_S="0.5",
        SIDECAR_RETAINED_LONG_S="1",
    )


async def accept(client, *arguments):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="sidecar.acceptCompletion", arguments=list(arguments))
    )


async def stats(client):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command="sidecar.stats"))


async def suggest(client):
    r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 20)
    assert r is not None and r.items and r.items[0].insert_text == SUGGESTION
    return r.items[0]


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(("c999999",), id="never-shown-id"),
        pytest.param((12345,), id="id-not-a-string"),
        pytest.param((), id="no-arguments"),
        pytest.param((None, None), id="nulls"),
        pytest.param(({"id": "c1"}, [3]), id="objects"),
    ],
)
async def test_an_accept_of_nothing_shown_counts_nothing(tmp_path, sim, arguments):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        await suggest(client)
        assert await accept(client, *arguments) is None
        snap = await stats(client)
        again = await suggest(client)  # the session serves on
    acc = snap["acceptance"]
    assert acc["accepted"] == 0 and acc["accepted_chars"] == 0 and acc["unknown"] == 1, acc
    assert acc["retained"] == [] or all(r["accepted_chars"] == 0 for r in acc["retained"]), acc
    assert again.insert_text == SUGGESTION


@pytest.mark.parametrize(
    "units,taken",
    [
        pytest.param(-5, len(SUGGESTION), id="negative-units-whole"),
        pytest.param("6", len(SUGGESTION), id="units-as-string-whole"),
        pytest.param(True, len(SUGGESTION), id="units-bool-whole"),
        pytest.param(10_000, len(SUGGESTION), id="units-past-the-end-whole"),
        pytest.param(6, 6, id="partial"),
    ],
)
async def test_an_accept_with_a_bad_length_is_counted_as_what_can_be_known(tmp_path, sim, units, taken):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        item = await suggest(client)
        item_id = item.command.arguments[0]
        assert await accept(client, item_id, units) is None
        snap = await stats(client)
        errors = [m.message for m in client.log_messages if m.type == types.MessageType.Error]
    acc = snap["acceptance"]
    assert acc["accepted"] == 1 and acc["accepted_chars"] == taken, acc
    assert not errors, errors


async def test_a_word_by_word_accept_counts_each_word_once(tmp_path, sim):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        item = await suggest(client)
        item_id = item.command.arguments[0]
        for units in (7, 9, 9, 4, 17, len(SUGGESTION)):  # "result ", "= ", again, back, "3.14159 ", the rest
            await accept(client, item_id, units)
        snap = await stats(client)
    acc = snap["acceptance"]
    assert acc["accepted"] == 1 and acc["accepted_chars"] == len(SUGGESTION), acc
    assert snap["counters"].get("accepted_repeat") == 2


async def test_an_accept_of_the_same_item_twice_and_after_the_document_closed(tmp_path, sim):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, "def area(r):\n    \n")
        item = await suggest(client)
        item_id = item.command.arguments[0]
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=2),
                content_changes=[
                    types.TextDocumentContentChangePartial(
                        range=types.Range(start=types.Position(1, 4), end=types.Position(1, 4)), text=SUGGESTION
                    )
                ],
            )
        )
        await accept(client, item_id, len(SUGGESTION))
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=URI))
        )
        await accept(client, item_id, len(SUGGESTION))  # a double accept, of a closed document
        await asyncio.sleep(1.3)  # past both retention horizons
        snap = await stats(client)
        open_doc(client, URI, "def area(r):\n    \n")
        again = await suggest(client)
    acc = snap["acceptance"]
    assert acc["accepted"] == 1 and acc["accepted_chars"] == len(SUGGESTION), acc  # the repeat counts nothing
    assert snap["counters"].get("accepted_repeat") == 1
    # The closed document's text is unknown: nothing is claimed as retained beyond what was accepted.
    for row in acc["retained"]:
        assert 0 <= row["retained_chars"] <= row["accepted_chars"], acc["retained"]
    assert again.insert_text == SUGGESTION
