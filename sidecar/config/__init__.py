"""Settings: defaults, user config file, environment, initializationOptions, didChangeConfiguration.

Precedence, lowest to highest (docs/architecture.md, "Facts we checked"): built-in defaults, the user config file
(TOML, ``<platform config dir>/sidecar/config.toml`` or ``$SIDECAR_CONFIG``), environment
variables, LSP ``initializationOptions``, LSP ``workspace/didChangeConfiguration``.

Each setting is declared once, in ``settings.py`` (``declare.py``: :func:`setting`);
``load.py`` reads and validates the sources, ``doc.py`` writes the documentation's table.
Every value is validated; an invalid one raises :class:`ConfigError` naming the setting,
the bad value and where it came from. Where the server reads them, one bad value drops
only itself (``normalize(..., errors)``), and settings that contradict each other drop
only themselves from the lowest layer that set them (``settle``), never the rest of a
layer. A base URL that is set but invalid is the exception: it is not dropped but
leaves no cloud backend (``Settings.base_url_error``), since the key was meant for it.
Secrets (the API keys, secret headers) are kept out of ``repr`` and logs.
"""

from .declare import ConfigError, Spec, setting
from .doc import settings_table_markdown
from .load import (
    BACKEND_FIELDS,
    ENV_VARS,
    OPENAI_ENV_VARS,
    backend_changed,
    build,
    config_file_path,
    from_env,
    from_file,
    normalize,
    refused_base_url,
    settle,
)
from .resolve import resolve_settings
from .settings import APP_NAME, Settings

__all__ = [
    "APP_NAME",
    "BACKEND_FIELDS",
    "ENV_VARS",
    "OPENAI_ENV_VARS",
    "ConfigError",
    "Settings",
    "Spec",
    "backend_changed",
    "build",
    "config_file_path",
    "from_env",
    "from_file",
    "normalize",
    "refused_base_url",
    "resolve_settings",
    "setting",
    "settings_table_markdown",
    "settle",
]
