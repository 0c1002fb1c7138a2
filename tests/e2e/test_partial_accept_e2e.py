"""A word, a line, then the rest of one suggestion, over real stdio (acceptance.py,
docs/editors.md "What every editor tells the server"): what an editor sends when the
user takes a suggestion a piece at a time, and what the server counts.

The client plays an editor that re-asks at the new cursor after each partial accept:
the server answers each rest from the same stream (one upstream request), as a new item
of the same suggestion. Counts: displayed 1 (however many of its items are reported
shown), partial accepts 2, full accept 1, characters split accordingly; the confidence
gate learns one label (the taken part was right), not one per item; the Prometheus
endpoint serves the same counters.
"""

from __future__ import annotations

import asyncio
import socket

import httpx2 as httpx
import pytest
from lsprotocol import types

from conftest import client_capabilities, inline_params, open_doc, sidecar, sidecar_env
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(120)
URI = "file:///w/total.py"
TEXT = "def total(xs):\n    \n"
SUGGESTION = "total = 0\n    for x in xs:\n        total += x"
SHOWN = "sidecar/didShowCompletion"


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=7)) as s:
        s.set_responder(lambda body: SUGGESTION)
        yield s


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(tmp_path, sim):
    """An OpenAI-compatible backend (the simulator returns log-probabilities when asked),
    so the confidence gate judges and labels these suggestions; its bar is low enough
    that this one is shown."""
    return sidecar_env(
        tmp_path,
        SIDECAR_PROVIDER="openai",
        SIDECAR_BASE_URL=sim.base_url,
        SIDECAR_API_KEY="sk-partial-123456789",
        SIDECAR_PREFETCH="false",
        SIDECAR_GATE="true",
        SIDECAR_GATE_THRESHOLD="0.05",
    )


async def cmd(client, name, *args):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=list(args)))


async def ask(client, line, col):
    """What an editor that renders updates shows at ``line:col``: ``(item id, text,
    answer's item)``, the last update's item once the stream is done, else the answer's."""
    seen = len(client.sidecar_updates)
    r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, line, col)), 20)
    assert r is not None and r.items, f"nothing at {line}:{col}"
    answer = r.items[0]
    shown = (answer.command.arguments[0], answer.insert_text)
    for _ in range(200):
        new = [u for _t, u in client.sidecar_updates[seen:] if u["uri"] == URI]
        for u in new:
            if u["items"]:
                shown = (u["items"][0]["command"]["arguments"][0], u["items"][0]["insertText"])
        if any(u["done"] for u in new) or (not new and r.items[0].insert_text == SUGGESTION):
            break
        await asyncio.sleep(0.02)
    return shown[0], shown[1], answer


def insert(client, version, line, col, text):
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=URI, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=types.Position(line, col), end=types.Position(line, col)), text=text
                )
            ],
        )
    )


def upstream(sim):
    return len([r for r in sim.requests if r.path.endswith("/completions")])


async def test_a_word_a_line_and_the_rest_are_one_suggestion(tmp_path, sim):
    port = free_port()
    async with sidecar(env_for(tmp_path, sim), init_options={"prometheusPort": port}) as client:
        open_doc(client, URI, TEXT)
        first, text, answer = await ask(client, 1, 4)
        assert text == SUGGESTION
        # An editor that reports the answer's item, its update, and every redraw: one suggestion.
        for item_id in (answer.command.arguments[0], first, first):
            client.protocol.notify(SHOWN, {"id": item_id})
        # Accept word: "total".
        await cmd(client, "sidecar.acceptCompletion", first, 5)
        insert(client, 2, 1, 4, "total")
        gate_after_word = (await cmd(client, "sidecar.stats"))["gate"]
        second, text, _ = await ask(client, 1, 9)
        assert text == SUGGESTION[5:] and second != first
        client.protocol.notify(SHOWN, {"id": second})
        # Accept line: " = 0".
        await cmd(client, "sidecar.acceptCompletion", second, 4)
        insert(client, 3, 1, 9, " = 0")
        third, text, answer = await ask(client, 1, 13)
        rest = SUGGESTION[9:]
        assert text == rest
        client.protocol.notify(SHOWN, {"id": third})
        # Accept the rest (the editor's full accept: the item's whole length).
        await cmd(client, "sidecar.acceptCompletion", third, len(rest))
        snap = await cmd(client, "sidecar.stats")
        async with httpx.AsyncClient(trust_env=False) as http:
            body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    acc = snap["acceptance"]
    assert (acc["displayed"], acc["partial"], acc["full"], acc["accepted"]) == (1, 2, 1, 1), acc
    assert (acc["partial_chars"], acc["full_chars"], acc["accepted_chars"]) == (9, len(rest), len(SUGGESTION)), acc
    assert acc["rate_of"] == "displayed" and acc["rate"] == 1.0, acc
    assert upstream(sim) == 1  # every rest came from the one stream
    # The gate learned from the word (a partial accept is "some of it was right"), and
    # from nothing else: the rests are the same suggestion.
    assert gate_after_word["accepted"] == 1 and gate_after_word["rejected"] == 0, gate_after_word
    assert snap["gate"]["accepted"] == 1 and snap["gate"]["rejected"] == 0, snap["gate"]
    lines = dict(line.rsplit(" ", 1) for line in body.splitlines() if line and not line.startswith("#"))
    assert float(lines["sidecar_suggestions_displayed_total"]) == 1
    assert float(lines["sidecar_accepts_partial_total"]) == 2
    assert float(lines["sidecar_accepts_full_total"]) == 1
    assert float(lines["sidecar_accepted_chars_partial_total"]) == 9


async def test_a_new_suggestion_elsewhere_counts_again_and_bad_notifications_are_dropped(tmp_path, sim):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT + "\n\n")
        first, _, _ = await ask(client, 1, 4)
        client.protocol.notify(SHOWN, {"id": first})
        client.protocol.notify(SHOWN, {"id": "c999999"})  # never handed out
        client.protocol.notify(SHOWN, {"item": 3})  # no id
        client.protocol.notify(SHOWN, None)
        other, _, _ = await ask(client, 3, 0)  # another place: another suggestion
        client.protocol.notify(SHOWN, {"id": other})
        snap = await cmd(client, "sidecar.stats")
        _, again, _ = await ask(client, 1, 4)  # the session serves on
        errors = [m.message for m in client.log_messages if m.type == types.MessageType.Error]
    acc = snap["acceptance"]
    assert acc["displayed"] == 2 and acc["accepted"] == 0 and acc["rate"] == 0.0, acc
    assert snap["counters"].get("displayed_unknown") == 1
    assert again == SUGGESTION
    assert not errors, errors


# ---------------------------------------------------------------- what a careless client sends
# Cases a hostile run found (each failed before its fix): the counts stay what a careful
# engineer expects, and the session serves on.


async def test_two_items_of_one_start_share_their_running_total(tmp_path, sim):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT)
        whole, text, answer = await ask(client, 1, 4)
        assert text == SUGGESTION and whole != answer.command.arguments[0]
        # The first line's item, then the whole suggestion's update item, same start.
        await cmd(client, "sidecar.acceptCompletion", answer.command.arguments[0], 5)
        await cmd(client, "sidecar.acceptCompletion", whole, 9)
        await cmd(client, "sidecar.acceptCompletion", whole, len(SUGGESTION))
        acc = (await cmd(client, "sidecar.stats"))["acceptance"]
    assert (acc["accepted"], acc["partial"], acc["full"]) == (1, 2, 1), acc
    assert (acc["partial_chars"], acc["accepted_chars"]) == (9, len(SUGGESTION)), acc


async def test_an_accept_of_nothing_counts_nothing_and_the_rate_stays_at_most_one(tmp_path, sim):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT + "\n\n")
        first, _, _ = await ask(client, 1, 4)
        other, _, _ = await ask(client, 3, 0)
        client.protocol.notify(SHOWN, {"id": first})
        await cmd(client, "sidecar.acceptCompletion", first, 0)  # took nothing
        snap = await cmd(client, "sidecar.stats")
        await cmd(client, "sidecar.acceptCompletion", first)
        await cmd(client, "sidecar.acceptCompletion", other)  # never reported displayed
        after = await cmd(client, "sidecar.stats")
    acc = snap["acceptance"]
    assert acc["accepted"] == 0 and acc["accepted_chars"] == 0 and acc["rate"] == 0.0, acc
    assert snap["counters"].get("accepted_nothing") == 1
    acc = after["acceptance"]
    assert acc["displayed"] == 1 and acc["accepted"] == 2 and acc["rate"] == 1.0, acc


async def test_units_count_the_items_insert_text_in_the_negotiated_encoding(tmp_path, sim):
    # A CRLF document: the item carries "\r\n" breaks, and Accept Line takes the first line
    # with its break (11 units of insertText): 10 characters of the suggestion, not 11.
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT.replace("\n", "\r\n"))
        item, text, _ = await ask(client, 1, 4)
        assert text == SUGGESTION.replace("\n", "\r\n")
        await cmd(client, "sidecar.acceptCompletion", item, 11)
        acc = (await cmd(client, "sidecar.stats"))["acceptance"]
    assert (acc["partial"], acc["partial_chars"]) == (1, 10), acc
    # A client that negotiated UTF-32: the item's own command is a whole accept.
    sim.set_responder(lambda body: 'x = "\U0001f600\U0001f600"')
    caps = client_capabilities()
    caps.general.position_encodings = [types.PositionEncodingKind.Utf32]
    async with sidecar(env_for(tmp_path / "utf32", sim), capabilities=caps) as client:
        open_doc(client, URI, "def f():\n    \n")
        r = await asyncio.wait_for(client.text_document_inline_completion_async(inline_params(URI, 1, 4)), 20)
        item = r.items[0]
        await cmd(client, item.command.command, *item.command.arguments)
        acc = (await cmd(client, "sidecar.stats"))["acceptance"]
    assert item.command.arguments[1] == 8
    assert (acc["full"], acc["partial"], acc["full_chars"]) == (1, 0, 8), acc


async def test_a_notification_without_params_is_dropped_quietly(tmp_path, sim, capfd):
    async with sidecar(env_for(tmp_path, sim)) as client:
        open_doc(client, URI, TEXT)
        client.protocol._send_data({"jsonrpc": "2.0", "method": SHOWN})  # params may be omitted
        _, text, _ = await ask(client, 1, 4)
        acc = (await cmd(client, "sidecar.stats"))["acceptance"]
    assert text == SUGGESTION and acc["displayed"] == 0
    err = capfd.readouterr().err  # the server's stderr (its log)
    assert "sidecar/didShowCompletion: params must be" in err and "unable to handle a message" not in err, err[-2000:]
