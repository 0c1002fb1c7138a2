"""The settings of the config file and the environment as ``serve`` resolves them, for
the commands that run outside a server (``sidecar doctor``, ``sidecar config``, ...)."""

from __future__ import annotations

from .declare import ConfigError
from .load import build, config_file_path, from_env, from_file, refused_base_url, settle
from .settings import Settings


def resolve_settings() -> tuple[Settings, list[str]]:
    """The settings of the config file and the environment as ``serve`` resolves them,
    and one line per thing it ignored. A bad value drops only itself
    (``normalize``); settings that contradict each other drop only themselves, the
    config file's before the environment's (``settle``, as ``lsp/server.py``); a
    config file that cannot be read at all (not TOML, binary, a folder) is ignored whole,
    and the environment and the defaults serve. Never raises ConfigError."""
    errors: list[str] = []
    notes: list[str] = []
    path = config_file_path()
    try:
        file_layer = from_file(errors=errors)
    except ConfigError as exc:  # not TOML at all, binary, a folder: serve ignores it too
        notes.append(f"{exc}; the whole file is ignored, as the server does: the environment and the defaults are used")
        file_layer = {}
    env_layer = from_env(errors=errors)
    layers = settle([file_layer, env_layer], errors, names=(f"config file {path}", "the environment"))
    try:
        settings = build(*layers)
    except ConfigError as exc:  # not after settle(): a last resort, as serve's
        notes.append(f"{exc} (using the defaults)")
        settings = build()
    for msg in errors:
        said = msg.endswith("(ignored)") or "; ignored " in msg
        notes.append(refused_base_url(msg, settings) or (msg if said else f"{msg} (ignored)"))
    return settings, notes
