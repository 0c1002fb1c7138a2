"""The workspace index over real stdio, with a real workspace on disk
(completion/crossfile/workspace.py, lsp/workspace_events.py; docs/architecture.md "The
workspace index").

The client sends ``workspaceFolders`` at ``initialize``, opens one file only and waits
for ``sidecar.stats`` to say ``workspace_index.state == "ready"``; the backend is the
simulator, whose recorded requests show what the prompt carried:

- a name imported from a file that was never opened brings its definition into the
  prompt (Python ``from .helpers import name``; JavaScript ``require('./helpers')``
  brings the file's outline), and nothing of it with ``workspace_index = false``;
- bad input (a file that cannot be read, a symlink loop and a linked parent folder, a
  50 MB file, a binary file with a source extension, ``.gitignore``d and ``node_modules``
  files, a workspace folder that disappears): the index gets ready, counts the skips by
  reason, logs each skipped file at most once, never indexes ignored or vendored code,
  and the server keeps answering with no traceback;
- kept current: a file created after the index is ready (``didChangeWatchedFiles``) and
  a closed file changed on disk and saved (``didSave``) reach later prompts.

Two tests reproduce bugs a first run found (now fixed): a change event for a FIFO
blocked the index thread, and each event for a skipped file counted and logged it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from conftest import client_capabilities, index_stats, inline_params, make_client, open_doc, sidecar_env, wait_ready
from devtools.simulator import LatencyModel, SimulatedBackend

pytestmark = pytest.mark.timeout(90)

KEY = "sk-test-workspace-index-0123456789"
INIT = {"debounceMinMs": 0, "debounceMaxMs": 0, "prefetchEnabled": False}
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

HELPERS_PY = '''"""Header helpers."""

import re

_TOKEN = re.compile(r"[^\\x00-\\x1f]+")


def normalize_header_value(value, encoding="latin-1"):
    """A header value as text: bytes decoded, outer whitespace stripped."""
    if isinstance(value, bytes):
        value = value.decode(encoding)
    return value.strip()


class HeaderBag:
    """Headers by lower-cased name."""

    def __init__(self):
        self._items = {}

    def add_header(self, name, value):
        self._items[name.lower()] = normalize_header_value(value)

    def get_header(self, name, default=None):
        return self._items.get(name.lower(), default)
'''
HELPERS_DEF = 'def normalize_header_value(value, encoding="latin-1"):'

MAIN_PY = """from .helpers import HeaderBag, normalize_header_value


def collect(raw_headers):
    bag = HeaderBag()
    for name, value in raw_headers:
        bag.add_header(name, value)
    return bag


def first_value(raw_headers, wanted):
    for name, value in raw_headers:
        if name == wanted:
            return normalize_header_value("""

HELPERS_JS = """'use strict';

function formatPrice(amount, currency) {
  return currency + ' ' + amount.toFixed(2);
}

function parseQueryString(qs) {
  const out = {};
  for (const part of qs.split('&')) {
    const [k, v] = part.split('=');
    out[decodeURIComponent(k)] = decodeURIComponent(v || '');
  }
  return out;
}

module.exports = { formatPrice, parseQueryString };
"""

MAIN_JS = """const helpers = require('./helpers');

function orderTotal(items) {
  let sum = 0;
  for (const item of items) {
    sum += item.price * item.quantity;
  }
  return helpers."""


# ---------------------------------------------------------------------- helpers
def uri_of(path: Path) -> str:
    return path.resolve().as_uri()


def end_of(text: str) -> tuple[int, int]:
    """The (line, character) of the end of ``text`` (ASCII here, so UTF-16 alike)."""
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def capabilities() -> types.ClientCapabilities:
    """Our editors' capabilities, plus workspace folders and dynamically registered
    file watching (as VS Code declares them)."""
    caps = client_capabilities()
    caps.workspace = types.WorkspaceClientCapabilities(
        workspace_folders=True,
        did_change_watched_files=types.DidChangeWatchedFilesClientCapabilities(dynamic_registration=True),
    )
    return caps


def recording_client() -> LanguageClient:
    """conftest's client, which also accepts ``client/registerCapability`` and keeps
    what was registered in ``client.registrations``."""
    client = make_client()
    client.registrations = []  # type: ignore[attr-defined]

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def _register(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)  # type: ignore[attr-defined]

    return client


@contextlib.asynccontextmanager
async def server(
    tmp_path: Path, sim: SimulatedBackend, folders: list[Path], init: dict[str, Any] | None = None
) -> AsyncIterator[LanguageClient]:
    """``python -m sidecar serve`` over stdio, initialized with ``folders`` as its
    workspace folders (the first also as the root)."""
    env = sidecar_env(tmp_path / "home", SILICONFLOW_API_KEY=KEY, SIDECAR_BASE_URL=sim.base_url, SIDECAR_CACHE="false")
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "sidecar", "serve"], server_env=env, client_factory=recording_client
    )
    client = await config.start()
    await client.initialize_session(
        types.InitializeParams(
            capabilities=capabilities(),
            initialization_options={**INIT, **(init or {})},
            root_uri=uri_of(folders[0]),
            workspace_folders=[types.WorkspaceFolder(uri=uri_of(f), name=f.name) for f in folders],
        )
    )
    try:
        yield client
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.fixture
async def sim():
    async with SimulatedBackend(latency=LatencyModel(ttft_ms=5, tokens_per_s=2000, seed=11)) as s:
        s.set_responder(lambda body: "value")
        yield s


async def wait_epoch_past(client: LanguageClient, epoch: int, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    st: dict[str, Any] = {}
    while time.monotonic() < deadline:
        st = await index_stats(client)
        if st["epoch"] > epoch:
            return st
        await asyncio.sleep(0.02)
    raise AssertionError(f"the index's epoch stayed at {epoch}: {st}")


def completions(sim: SimulatedBackend) -> list[Any]:
    return [r for r in sim.requests if r.path.endswith("/completions") and r.body]


async def prompt_at(client: LanguageClient, sim: SimulatedBackend, uri: str, line: int, col: int) -> str:
    """Ask for an inline completion at (line, col) of ``uri``; the prompt the backend got.
    The request must be answered (a list of items)."""
    before = len(completions(sim))
    answer = await asyncio.wait_for(
        client.text_document_inline_completion_async(inline_params(uri, line, col, invoked=True)), 30
    )
    assert answer is not None and answer.items, "the server answered the request"
    for _ in range(200):
        if len(completions(sim)) > before:
            break
        await asyncio.sleep(0.01)
    assert len(completions(sim)) > before, "the request went upstream"
    return completions(sim)[-1].body["prompt"]


def watched(client: LanguageClient, *changes: tuple[Path, types.FileChangeType]) -> None:
    client.workspace_did_change_watched_files(
        types.DidChangeWatchedFilesParams(changes=[types.FileEvent(uri=uri_of(p), type=t) for p, t in changes])
    )


def python_project(root: Path) -> Path:
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text(HELPERS_PY)
    (pkg / "main.py").write_text(MAIN_PY)
    web = root / "web"
    web.mkdir()
    (web / "helpers.js").write_text(HELPERS_JS)
    (web / "main.js").write_text(MAIN_JS)
    return root


# ---------------------------------------------------------------------- positive
async def test_an_imported_definition_from_a_never_opened_file_reaches_the_prompt(tmp_path, sim):
    root = python_project(tmp_path / "project")
    main = root / "pkg" / "main.py"
    async with server(tmp_path, sim, [root]) as client:
        open_doc(client, uri_of(main), MAIN_PY)  # the only document the editor opens
        st, waited = await wait_ready(client)
        prompt = await prompt_at(client, sim, uri_of(main), *end_of(MAIN_PY))
        # JavaScript: `const helpers = require('./helpers')` and `helpers.` at the cursor.
        main_js = root / "web" / "main.js"
        open_doc(client, uri_of(main_js), MAIN_JS, "javascript")
        js_prompt = await prompt_at(client, sim, uri_of(main_js), *end_of(MAIN_JS))
        registrations = list(client.registrations)  # type: ignore[attr-defined]
    assert waited < 10, waited
    assert st["files"] == 5 and st["listed"] == 5 and st["definitions"] >= 7, st
    assert st["listed_s"] is not None and st["build_s"] is not None, st
    # The definition of the imported name, from pkg/helpers.py (never opened), with its
    # path; the current file comes after it, once.
    assert HELPERS_DEF in prompt, prompt
    assert "pkg/helpers.py" in prompt, prompt
    assert prompt.index(HELPERS_DEF) < prompt.index("def first_value(raw_headers, wanted):"), prompt
    assert prompt.count("def first_value(raw_headers, wanted):") == 1, prompt
    # The outline of web/helpers.js: the first lines of its functions.
    assert "function formatPrice(amount, currency) {" in js_prompt, js_prompt
    assert "function parseQueryString(qs) {" in js_prompt, js_prompt
    assert "web/helpers.js" in js_prompt, js_prompt
    # The server asked the client to watch the indexed files.
    methods = [r.method for r in registrations]
    assert types.WORKSPACE_DID_CHANGE_WATCHED_FILES in methods, registrations


async def test_with_the_setting_off_the_closed_file_stays_out_of_the_prompt(tmp_path, sim):
    root = python_project(tmp_path / "project")
    main = root / "pkg" / "main.py"
    async with server(tmp_path, sim, [root], {"workspace_index": False}) as client:
        open_doc(client, uri_of(main), MAIN_PY)
        st = await index_stats(client)
        await asyncio.sleep(0.5)  # time the index would have needed, were it on
        prompt = await prompt_at(client, sim, uri_of(main), *end_of(MAIN_PY))
        later = await index_stats(client)
        registrations = list(client.registrations)  # type: ignore[attr-defined]
    assert st == {"state": "off"} and later == {"state": "off"}, (st, later)
    assert "def first_value(raw_headers, wanted):" in prompt, prompt  # the request itself is fine
    assert HELPERS_DEF not in prompt and "helpers.py" not in prompt, prompt
    assert not registrations, registrations


# ---------------------------------------------------------------------- bad input
BAD_MAIN = """from .good import visible_helper_function


def run(items):
    total = visible_helper_function(items)
    extra = ignored_only_function(total) + vendored_only_function(total)
    return total + extra + """

# Where the test asks, one place per request: asked again where its suggestion was shown,
# the server shows it again without asking the backend.
AT = [end_of(BAD_MAIN), (5, 72), (4, 42), (3, 15)]
SKIPPED_LOG = re.compile(r"workspace index: skipped (\S+) \(([^)]*)\)")


def bad_workspace(root: Path) -> dict[str, Path]:
    """One workspace with every kind of bad input at once; returns the notable paths."""
    pkg = root / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "good.py").write_text("def visible_helper_function(items):\n    return sum(items)\n")
    (pkg / "main.py").write_text(BAD_MAIN)
    # An unreadable file. Root reads a mode-000 file, so the unreadable ones that hold for
    # root too are a FIFO with a source extension (nothing ever writes to it: opening it
    # would block) and a dangling link; the mode-000 file counts only for other users.
    noperm = pkg / "noperm.py"
    noperm.write_text("def no_permission_function():\n    pass\n")
    noperm.chmod(0)
    os.mkfifo(pkg / "x.py")
    (pkg / "gone.py").symlink_to(pkg / "missing.py")
    # A symlink loop (files and a folder), and a folder linked to its parent.
    (pkg / "loop_a.py").symlink_to(pkg / "loop_b.py")
    (pkg / "loop_b.py").symlink_to(pkg / "loop_a.py")
    (pkg / "loopdir").symlink_to(pkg / "loopdir")
    (pkg / "up").symlink_to(pkg)
    # 50 MB (sparse), and a binary file with a source extension.
    big = pkg / "big.py"
    with open(big, "wb") as fh:
        fh.write(b"def big_file_function():\n    pass\n")
        fh.truncate(50 * 1024 * 1024)
    (pkg / "bin.py").write_bytes(b"def binary_file_function():\n    pass\n\x00\x01\x02\x00" * 4)
    # Ignored and vendored code.
    (root / ".gitignore").write_text("ignored/\n")
    (root / "ignored").mkdir()
    (root / "ignored" / "secret.py").write_text("def ignored_only_function(x):\n    return x\n")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "x.js").write_text("function vendored_only_function(x) {\n  return x;\n}\n")
    (root / "node_modules" / "y.py").write_text("def vendored_only_function(x):\n    return x\n")
    return {"main": pkg / "main.py", "big": big, "bin": pkg / "bin.py", "noperm": noperm, "pkg": pkg}


async def test_bad_input_is_skipped_logged_once_and_nothing_stops(tmp_path, sim, capfd):
    paths = bad_workspace(tmp_path / "bad")
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)
    (other / "lib" / "vanishing.py").write_text("def vanishing_function(x):\n    return x\n")
    main_uri = uri_of(paths["main"])
    async with server(tmp_path, sim, [tmp_path / "bad"]) as client:
        open_doc(client, main_uri, BAD_MAIN)
        st, waited = await wait_ready(client)
        prompt = await prompt_at(client, sim, main_uri, *AT[0])
        # The ignored and vendored files announced as created: still not indexed.
        watched(
            client,
            (tmp_path / "bad" / "ignored" / "secret.py", types.FileChangeType.Created),
            (tmp_path / "bad" / "node_modules" / "x.js", types.FileChangeType.Created),
        )
        await asyncio.sleep(0.3)
        after_events = await prompt_at(client, sim, main_uri, *AT[1])
        # A second workspace folder that disappears while the server runs.
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=uri_of(other), name="other")], removed=[]
                )
            )
        )
        st2, _ = await wait_ready(client)
        shutil.rmtree(other)
        epoch = (await index_stats(client))["epoch"]
        watched(
            client,
            (other / "lib" / "vanishing.py", types.FileChangeType.Deleted),
            (other / "lib" / "vanishing.py", types.FileChangeType.Changed),
            (other / "lib" / "new.py", types.FileChangeType.Created),
        )
        st3 = await wait_epoch_past(client, epoch)
        after_rm = await prompt_at(client, sim, main_uri, *AT[2])
        # Removing the vanished folder, and adding one that does not exist.
        client.workspace_did_change_workspace_folders(
            types.DidChangeWorkspaceFoldersParams(
                event=types.WorkspaceFoldersChangeEvent(
                    added=[types.WorkspaceFolder(uri=uri_of(tmp_path / "never"), name="never")],
                    removed=[types.WorkspaceFolder(uri=uri_of(other), name="other")],
                )
            )
        )
        st4, _ = await wait_ready(client)
        last = await prompt_at(client, sim, main_uri, *AT[3])
    err = capfd.readouterr().err  # the server's stderr (its log)
    paths["noperm"].chmod(0o644)  # let tmp_path be cleaned up

    assert waited < 10, waited
    # Indexed: __init__.py, good.py, main.py and nothing else of the bad folder.
    # (root reads the mode-000 file: one more)
    assert st["files"] == 3 + IS_ROOT and st["listed"] == 3 + IS_ROOT, st
    skipped = st["skipped"]
    assert skipped.get("too large") == 1 and skipped.get("binary") == 1, skipped
    # The two looping links and the folder linking to itself (ELOOP), and the mode-000
    # file for a user other than root.
    assert skipped.get("unreadable") == 3 + (not IS_ROOT), skipped
    assert st2["files"] == st["files"] + 1 and st2["folders"] == 2, st2  # the second folder's one file
    assert st3["files"] == st["files"], st3  # ... dropped once it was deleted
    assert st4["folders"] == 2 and st4["files"] == st["files"], st4  # the bad folder and "never"

    for p in (prompt, after_events, after_rm, last):
        assert "def visible_helper_function(items):" in p, p  # the index serves this request
        for absent in (
            "ignored_only_function(x)",
            "vendored_only_function(x)",
            "big_file_function",
            "binary_file_function",
            "no_permission_function",
            "vanishing_function",
        ):
            assert absent not in p, (absent, p)

    assert "Traceback" not in err and " ERROR " not in err, err[-4000:]
    logged = SKIPPED_LOG.findall(err)
    per_file: dict[str, int] = {}
    for path, _why in logged:
        per_file[path] = per_file.get(path, 0) + 1
    assert per_file.get(str(paths["big"])) == 1 and per_file.get(str(paths["bin"])) == 1, logged
    assert all(n == 1 for n in per_file.values()), per_file
    reasons = {path: why for path, why in logged}
    assert reasons[str(paths["big"])] == "too large" and reasons[str(paths["bin"])] == "binary", reasons
    for name in ("loop_a.py", "loop_b.py", "loopdir") + (() if IS_ROOT else ("noperm.py",)):
        assert reasons.get(str(paths["pkg"] / name), "").startswith("unreadable"), (name, reasons)
    assert "cannot be read" in err and str(tmp_path / "never") in err, err[-4000:]


# ---------------------------------------------------------------------- kept current
USE_NEW = """from .extra import brand_new_function_name


def handler(event):
    payload = event["payload"]
    return brand_new_function_name("""
NEW_DEF = "def brand_new_function_name(payload, retries=3):"

USE_SAVED = """from .helpers import normalize_header_value, saved_only_helper


def render(cell):
    return saved_only_helper("""
SAVED_DEF = "def saved_only_helper(cell, width=80):"


async def test_files_created_or_saved_after_the_build_reach_later_prompts(tmp_path, sim):
    root = python_project(tmp_path / "project")
    pkg = root / "pkg"
    main = pkg / "main.py"
    async with server(tmp_path, sim, [root]) as client:
        open_doc(client, uri_of(main), MAIN_PY)
        ready, _ = await wait_ready(client)
        # A file the editor never opened, created on disk (by git, a generator...).
        (pkg / "extra.py").write_text(f'{NEW_DEF}\n    """Sends it."""\n    return payload\n')
        watched(client, (pkg / "extra.py", types.FileChangeType.Created))
        created = await wait_epoch_past(client, ready["epoch"])
        use_new = pkg / "use_new.py"
        use_new.write_text(USE_NEW)
        open_doc(client, uri_of(use_new), USE_NEW)
        new_prompt = await prompt_at(client, sim, uri_of(use_new), *end_of(USE_NEW))
        # A closed file changed on disk and saved: didSave alone (no watcher event).
        (pkg / "helpers.py").write_text(HELPERS_PY + f"\n\n{SAVED_DEF}\n    return str(cell)[:width]\n")
        client.text_document_did_save(
            types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri_of(pkg / "helpers.py")))
        )
        saved = await wait_epoch_past(client, created["epoch"])
        use_saved = pkg / "use_saved.py"
        use_saved.write_text(USE_SAVED)
        open_doc(client, uri_of(use_saved), USE_SAVED)
        saved_prompt = await prompt_at(client, sim, uri_of(use_saved), *end_of(USE_SAVED))
        # A deleted file leaves the index and the prompts.
        await asyncio.sleep(0.3)  # the open documents parsed (after a pause in typing)
        before = await index_stats(client)
        (pkg / "extra.py").unlink()
        watched(client, (pkg / "extra.py", types.FileChangeType.Deleted))
        gone = await wait_epoch_past(client, before["epoch"])
        gone_prompt = await prompt_at(client, sim, uri_of(use_new), 4, 30)  # not where it was shown
    assert created["files"] == ready["files"] + 1, (ready, created)
    assert NEW_DEF in new_prompt and "pkg/extra.py" in new_prompt, new_prompt
    assert SAVED_DEF in saved_prompt, saved_prompt
    assert saved["files"] >= created["files"], (created, saved)
    assert before["files"] == created["files"] + 2, (created, before)  # use_new.py and use_saved.py, opened
    assert gone["files"] == before["files"] - 1, (before, gone)
    assert NEW_DEF not in gone_prompt, gone_prompt


# ---------------------------------------------------------------------- bugs found, fixed
async def test_an_event_for_a_fifo_does_not_stop_the_index(tmp_path, sim):
    """The walk never opens a FIFO (``entry.is_file()`` is false); a
    ``didChangeWatchedFiles`` (or ``didSave``/``didClose``) for one used to reach
    ``walk.skip_reason``, which opened it for reading and blocked the one index thread
    for good. Now anything but a regular file is skipped before it is opened."""
    root = python_project(tmp_path / "project")
    pkg = root / "pkg"
    os.mkfifo(pkg / "pipe.py")
    async with server(tmp_path, sim, [root]) as client:
        ready, _ = await wait_ready(client)
        watched(client, (pkg / "pipe.py", types.FileChangeType.Changed))
        await asyncio.sleep(0.2)
        (pkg / "extra.py").write_text(f"{NEW_DEF}\n    return payload\n")
        watched(client, (pkg / "extra.py", types.FileChangeType.Created))
        try:
            st = await wait_epoch_past(client, ready["epoch"], timeout=3)
        finally:
            with contextlib.suppress(OSError):  # unblock the index thread, if it is stuck
                fd = os.open(pkg / "pipe.py", os.O_WRONLY | os.O_NONBLOCK)
                os.close(fd)
    assert st["files"] == ready["files"] + 1, st


async def test_a_skipped_file_that_changes_is_logged_and_counted_once(tmp_path, sim, capfd):
    """Each ``didChangeWatchedFiles`` for a 50 MB file used to log one more "skipped" line
    (using up ``MAX_SKIP_LOGS``), add one to ``skipped`` in ``sidecar.stats`` and move the
    epoch (a recomputed snippet block for nothing). Now a file skipped for the same
    reason is counted and logged once, and the epoch stays."""
    root = python_project(tmp_path / "project")
    pkg = root / "pkg"
    with open(pkg / "big.py", "wb") as fh:
        fh.truncate(50 * 1024 * 1024)
    async with server(tmp_path, sim, [root]) as client:
        ready, _ = await wait_ready(client)
        epoch = ready["epoch"]
        for _ in range(3):
            watched(client, (pkg / "big.py", types.FileChangeType.Changed))
            await asyncio.sleep(0.1)
        st = await index_stats(client)
    err = capfd.readouterr().err
    lines = [m for m in SKIPPED_LOG.findall(err) if m[0] == str(pkg / "big.py")]
    assert st["skipped"].get("too large") == 1, st
    assert len(lines) == 1, lines
    assert st["epoch"] == epoch, (epoch, st)
