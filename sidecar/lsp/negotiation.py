"""What the client said it can do at ``initialize``, beyond LSP: whether it renders
``sidecar/inlineCompletionUpdate`` (docs/operations.md "Protocol"). A client that does gets the first
line early and the rest as updates; any other gets complete lines only (never a stub).
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

#: initializationOptions key: the client renders ``sidecar/inlineCompletionUpdate``.
UPDATES_OPTION = "inlineCompletionUpdates"


def client_renders_updates(params: types.InitializeParams) -> bool:
    """True when the client said at ``initialize`` that it renders ``sidecar/inlineCompletionUpdate``, in
    either place: ``capabilities.experimental.sidecar.inlineCompletionUpdate: true``, or
    ``initializationOptions.inlineCompletionUpdates: true`` (for clients that cannot add
    capabilities). Such a client gets the first line early and the rest as updates; any
    other client (Helix, Neovim's native inline completion, a generic LSP client) gets
    complete lines only, and the whole suggestion where it may span lines, within the
    request deadline (docs/operations.md "Protocol")."""
    exp = params.capabilities.experimental if params.capabilities is not None else None
    if isinstance(exp, dict):
        ours = exp.get("sidecar")
        if isinstance(ours, dict) and ours.get("inlineCompletionUpdate") is True:
            return True
    opts = params.initialization_options
    if not isinstance(opts, dict):
        return False
    nested = opts.get("sidecar")
    return opts.get(UPDATES_OPTION) is True or (isinstance(nested, dict) and nested.get(UPDATES_OPTION) is True)


def without_updates_option(opts: dict[str, Any]) -> dict[str, Any]:
    """``opts`` without UPDATES_OPTION, at the top level and in a ``sidecar`` section (the
    two shapes ``config.normalize`` accepts), so it is never reported as unknown."""
    out = {k: v for k, v in opts.items() if k != UPDATES_OPTION}
    nested = out.get("sidecar")
    if isinstance(nested, dict) and UPDATES_OPTION in nested:
        out["sidecar"] = {k: v for k, v in nested.items() if k != UPDATES_OPTION}
    return out
