"""The LSP side of the workspace index (``completion/crossfile/workspace.py``): which
folders it indexes and which events keep it current.

- **Folders**: ``initialize``'s ``workspaceFolders`` (else its ``rootUri``/``rootPath``),
  then ``workspace/didChangeWorkspaceFolders`` (pygls keeps ``ls.workspace.folders``;
  :func:`apply` hands them to the index). Only ``file:`` folders are indexed.
- **Open documents**: ``didOpen``/``didChange`` hand the index the document's text
  (:func:`opened_or_changed`; the index waits for a pause in typing before parsing it),
  ``didClose`` and ``didSave`` make it read the file from disk.
- **Files changed outside the editor**: ``workspace/didChangeWatchedFiles``, which the
  server registers for dynamically (``client/registerCapability``, one watcher per
  indexed extension) when the client declares ``workspace.didChangeWatchedFiles.
  dynamicRegistration``; never awaited, so no handler waits on the client (LSP 3.17,
  "workspace/didChangeWatchedFiles").
- **The setting** ``workspace_index``: on at ``initialized`` and whenever
  ``workspace/didChangeConfiguration`` turns it on; off drops the index's contents.

Nothing here raises into pygls: a malformed event is logged and dropped. See
docs/architecture.md ("The workspace index").
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from lsprotocol import types

from ..completion.crossfile.exclusion import IGNORE_FILE
from ..completion.crossfile.languages import EXTENSIONS

if TYPE_CHECKING:
    from .server import SidecarServer

log = logging.getLogger(__name__)

WATCH_ID = "sidecar-workspace-index"


def path_of(uri: str) -> str | None:
    """The absolute file path of a ``file:`` URI, else ``None``."""
    try:
        parsed = urlparse(uri)
    except (TypeError, ValueError):
        return None
    if parsed.scheme != "file":
        return None
    return os.path.abspath(unquote(parsed.path))


def folders_of(ls: SidecarServer) -> list[str]:
    """The workspace folders as paths: ``workspaceFolders``, else the root."""
    out = []
    try:
        for folder in ls.workspace.folders.values():
            p = path_of(folder.uri)
            if p:
                out.append(p)
        if not out and ls.workspace.root_path:
            out.append(os.path.abspath(ls.workspace.root_path))
    except RuntimeError:  # no workspace before initialize
        return []
    return out


def apply(ls: SidecarServer, enabled: bool) -> None:
    """Start (or keep) indexing the current folders when ``enabled``, else drop it all."""
    ls.index_enabled = enabled
    ls.exclusion.set_folders(folders_of(ls))  # content exclusion holds with the index off too
    if not enabled:
        if ls.index.folders:
            ls.index.set_folders([])
        return
    folders = folders_of(ls)
    ls.index.set_folders(folders)
    if folders and not ls.watch_registered:
        _register_watchers(ls)


def opened_or_changed(ls: SidecarServer, uri: str) -> None:
    """``didOpen``/``didChange``: the index gets the open document's text."""
    if not ls.index_enabled:
        return
    path = path_of(uri)
    if path is None:
        return
    doc = ls.workspace.text_documents.get(unquote(uri))
    if doc is not None:
        ls.index.changed(path, doc.source)


def from_disk(ls: SidecarServer, uri: str) -> None:
    """``didClose``/``didSave``: the index reads the file from disk."""
    if not ls.index_enabled:
        return
    path = path_of(uri)
    if path is not None:
        ls.index.changed(path)


def watched(ls: SidecarServer, params: types.DidChangeWatchedFilesParams) -> None:
    """``workspace/didChangeWatchedFiles``: created and changed files are read again,
    deleted ones dropped."""
    changes = getattr(params, "changes", None) or []
    if any((getattr(ev, "uri", "") or "").endswith("/" + IGNORE_FILE) for ev in changes):
        ls.exclusion.reload()
    if not ls.index_enabled:
        return
    for ev in changes:
        path = path_of(getattr(ev, "uri", "") or "")
        if path is None:
            continue
        if ev.type == types.FileChangeType.Deleted:
            ls.index.deleted(path)
        else:
            ls.index.changed(path)


def _register_watchers(ls: SidecarServer) -> None:
    caps: Any = ls.client_capabilities
    dynamic = getattr(
        getattr(getattr(caps, "workspace", None), "did_change_watched_files", None), "dynamic_registration", None
    )
    if not dynamic:
        return
    ls.watch_registered = True
    exts = ",".join(sorted(e.lstrip(".") for e in EXTENSIONS))
    params = types.RegistrationParams(
        registrations=[
            types.Registration(
                id=WATCH_ID,
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[
                        types.FileSystemWatcher(glob_pattern=f"**/*.{{{exts}}}"),
                        types.FileSystemWatcher(glob_pattern=f"**/{IGNORE_FILE}"),
                    ]
                ),
            )
        ]
    )
    try:
        fut = ls.client_register_capability(params)
    except Exception:  # noqa: BLE001 - a client that refuses: the index lives without it
        log.info("workspace index: could not register for file changes", exc_info=True)
        return

    def done(f: Any) -> None:
        try:
            exc = f.exception()
        except Exception:  # noqa: BLE001 - cancelled
            return
        if exc is not None:
            log.info("workspace index: the client refused file watching (%s)", exc)

    add = getattr(fut, "add_done_callback", None)
    if add is not None:
        add(done)


def register(server: Any) -> None:
    """Register the handlers of this module's events on ``server``."""

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    def on_folders(ls: SidecarServer, _params: types.DidChangeWorkspaceFoldersParams) -> None:
        apply(ls, ls.index_enabled)  # pygls has updated ls.workspace.folders already

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def on_open(ls: SidecarServer, params: types.DidOpenTextDocumentParams) -> None:
        opened_or_changed(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def on_save(ls: SidecarServer, params: types.DidSaveTextDocumentParams) -> None:
        from_disk(ls, params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def on_watched(ls: SidecarServer, params: types.DidChangeWatchedFilesParams) -> None:
        watched(ls, params)
