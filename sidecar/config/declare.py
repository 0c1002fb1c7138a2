"""How one setting is declared: :func:`setting` puts its :class:`Spec` (choices, range,
environment variables, secrecy, whether a change needs a new backend, its documentation)
in the dataclass field's metadata, next to its type and default. Every table about the
settings (``ENV_VARS``, ``BACKEND_FIELDS``, the documentation's table) is computed from
these fields; none is written by hand. Also the header-table checks that setting values
share (``headers``, ``local_headers``)."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SPEC = "sidecar.setting"

# Header names are RFC 9110 §5.6.2 tokens; values carry no CR, LF or NUL (§5.5).
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_SECRET_HEADER = re.compile(r"auth|key|token|secret|cookie|password", re.IGNORECASE)
#: Headers that the HTTP client owns; a custom table may not set them.
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "content-type",
        "te",
        "upgrade",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
    }
)


class ConfigError(ValueError):
    """An invalid setting. The message names the key, the value and its source.
    ``keys``: for settings that contradict each other (raised by ``load.build``), the
    settings involved, the likeliest culprit first (what ``load.settle`` drops)."""

    def __init__(self, message: str, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.keys = tuple(keys)


@dataclass(frozen=True)
class Spec:
    """What a setting is besides its type and default (see :func:`setting`)."""

    doc: str
    choices: tuple[str, ...] = ()
    range: tuple[float, float] | None = None
    env: tuple[str, ...] | None = None
    fallback_env: tuple[str, ...] = ()
    secret: bool = False
    backend: bool = False
    internal: bool = False
    url: bool = False
    default_doc: str | None = None


def setting(
    default: Any,
    *,
    doc: str,
    choices: tuple[str, ...] = (),
    range: tuple[float, float] | None = None,
    env: str | tuple[str, ...] | None = None,
    fallback_env: tuple[str, ...] = (),
    secret: bool = False,
    backend: bool = False,
    internal: bool = False,
    url: bool = False,
    default_doc: str | None = None,
) -> Any:
    """A field of ``Settings``, declared once.

    ``doc``: one line for the documentation's table. ``choices``: the allowed strings
    (matched lower-cased). ``range``: ``(min, max)`` inclusive for a number. ``env``: the
    environment variables, the later winning when several are set (default
    ``SIDECAR_<NAME>``). ``fallback_env``: variables read only when those leave it unset
    (``OPENAI_API_KEY``). ``secret``: kept out of ``repr``, logs and error messages (for
    a header table: the values of secret-looking header names). ``backend``: a change
    needs a new backend (a new connection pool or engine). ``internal``: derived while
    loading, no source may set it. ``url``: an ``http://`` or ``https://`` URL.
    ``default_doc``: the default as the documentation says it, when the value alone
    (often None) does not."""
    spec = Spec(
        doc=doc,
        choices=choices,
        range=range,
        env=(env,) if isinstance(env, str) else env,
        fallback_env=fallback_env,
        secret=secret,
        backend=backend,
        internal=internal,
        url=url,
        default_doc=default_doc,
    )
    return dataclasses.field(default=default, repr=not (secret or internal), metadata={SPEC: spec})


def spec_of(f: dataclasses.Field) -> Spec:
    return f.metadata[SPEC]


def env_vars_of(f: dataclasses.Field) -> tuple[str, ...]:
    """The environment variables of field ``f`` (none for an internal one)."""
    spec = spec_of(f)
    if spec.internal:
        return ()
    return spec.env if spec.env is not None else (f"SIDECAR_{f.name.upper()}",)


def is_secret_header(name: str) -> bool:
    """Whether a header's value is a secret (its name mentions auth, key, token, ...)."""
    return bool(_SECRET_HEADER.search(name))


def coerce_headers(key: str, value: Any, source: str) -> tuple[tuple[str, str], ...]:
    """A header table (a mapping, or a JSON object in a string such as ``SIDECAR_HEADERS``)
    as ``((name, value), ...)``. Raises ConfigError for a name that is not an RFC 9110
    token, a reserved name, or a value that is not a string without CR/LF."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"invalid setting '{key}' from {source}: {why}")

    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise bad('expected a JSON object such as {"X-Team": "infra"}') from None
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise bad("expected a table of header names to values")
    out: list[tuple[str, str]] = []
    for name, val in value.items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise bad(f"{name!r} is not a valid header name")
        if name.lower() in _RESERVED_HEADERS:
            raise bad(f"the header {name!r} is set by sidecar's HTTP client")
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            val = str(val)
        if not isinstance(val, str) or any(c in val for c in "\r\n\0"):
            raise bad(f"the value of {name!r} must be a string on one line")
        out.append((name, val.strip()))
    return tuple(out)
