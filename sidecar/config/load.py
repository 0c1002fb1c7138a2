"""Reading settings from their sources and merging them: validation and coercion of one
value (by the field's type and :class:`~.declare.Spec`), the config file, the
environment, and :func:`build`. The tables here (``ENV_VARS``, ``BACKEND_FIELDS``) are
computed from the declaration in ``settings.py``."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tomllib
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import platformdirs

from .. import providers as P
from ..observability import redact as _redact
from .declare import ConfigError, coerce_headers, env_vars_of, spec_of
from .settings import APP_NAME, Settings

FIELDS: dict[str, dataclasses.Field] = {f.name: f for f in dataclasses.fields(Settings)}
SPECS = {name: spec_of(f) for name, f in FIELDS.items()}


def _value_type(hint: Any) -> tuple[type, bool]:
    """``(type, optional)`` of an annotation: ``int | None`` is ``(int, True)``,
    ``tuple[tuple[str, str], ...]`` is ``(tuple, False)``, ``tuple[str, ...]`` (a list of
    strings) is ``(list, False)``."""
    args = typing.get_args(hint)
    optional = type(None) in args
    if optional:
        hint = next(a for a in args if a is not type(None))
    if typing.get_origin(hint) is tuple and typing.get_args(hint) == (str, ...):
        return list, optional  # a list of strings (patterns)
    return typing.get_origin(hint) or hint, optional


#: Each setting's value type and whether None (unset) is a value.
TYPES: dict[str, tuple[type, bool]] = {k: _value_type(h) for k, h in typing.get_type_hints(Settings).items()}
#: Environment variable -> setting, in reading order (a later variable wins).
ENV_VARS: dict[str, str] = {var: name for name, f in FIELDS.items() for var in env_vars_of(f)}
#: Read only when the variables of ``ENV_VARS`` leave the setting unset.
OPENAI_ENV_VARS: dict[str, str] = {var: name for name, s in SPECS.items() for var in s.fallback_env}
#: Fields whose change needs a new backend (and so a new connection pool or engine).
BACKEND_FIELDS: tuple[str, ...] = tuple(name for name, s in SPECS.items() if s.backend)
#: Settings no source may set: derived while loading.
_INTERNAL = frozenset(name for name, s in SPECS.items() if s.internal)
# Accept camelCase keys from editors (e.g. "maxTokens", "apiKey").
_ALIASES = {"".join(w.capitalize() if i else w for i, w in enumerate(name.split("_"))): name for name in FIELDS}
# Keys editors send under the "sidecar" section that are not server settings.
_EDITOR_ONLY = frozenset({"trace", "serverPath", "server_path", "python", "pythonPath", "enable", "enabled"})
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
#: The internal setting that marks an invalid base URL (``Settings.base_url_error``).
URL_ERROR = "base_url_error"
#: What follows the message of an invalid base URL when it leaves no cloud backend.
NO_CLOUD = (
    "; so no cloud backend is used: the API key is sent only to the base URL you set, never to another "
    "host. Fix the URL (it must start with http:// or https://) and restart sidecar, or set base_url in the "
    "editor's settings"
)


def _coerce_strings(key: str, value: Any, source: str) -> tuple[str, ...]:
    """A list of strings: a list, or a string holding a JSON array or comma-separated
    items (an environment variable). Empty items are dropped. Raises ConfigError."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                raise ConfigError(
                    f"invalid setting '{key}' from {source}: expected a JSON array of strings such as "
                    '["secrets/", "*.pem"]'
                ) from None
        else:
            value = text.split(",")
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"invalid setting '{key}' from {source}: expected a list of strings, got {value!r}")
    return tuple(v.strip() for v in value if v.strip())


def _coerce(key: str, value: Any, source: str) -> Any:
    """Convert ``value`` to the type of setting ``key``; raise ConfigError on failure."""
    typ, optional = TYPES[key]
    spec = SPECS[key]

    def bad(expect: str) -> ConfigError:
        shown = "***" if spec.secret else repr(value)
        return ConfigError(f"invalid setting '{key}' from {source}: expected {expect}, got {shown}")

    if typ is tuple:
        return coerce_headers(key, value, source)
    if typ is list:
        return _coerce_strings(key, value, source)
    if value is None or (optional and value == ""):
        if optional:
            return None
        raise bad("a value")
    out: Any
    if typ is bool:
        if isinstance(value, bool):
            out = value
        elif isinstance(value, str) and value.lower() in (*_TRUE, *_FALSE):
            out = value.lower() in _TRUE
        else:
            raise bad("true or false")
    elif typ is int:
        if isinstance(value, bool):
            raise bad("an integer")
        try:
            out = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            out = None
        if out is None:
            raise bad("an integer")
    elif typ is float:
        if isinstance(value, bool):
            raise bad("a number")
        try:
            out = float(value)
        except (TypeError, ValueError):
            raise bad("a number") from None
        if not math.isfinite(out):
            raise bad("a finite number")
    else:
        if not isinstance(value, str):
            raise bad("a string")
        out = value.strip()
        if spec.choices:
            out = out.lower()
            if out not in spec.choices:
                raise bad("one of " + ", ".join(spec.choices))
        if spec.url and out and not out.startswith(("http://", "https://")):
            raise bad("an http:// or https:// URL")
    if spec.range is not None and out is not None:
        lo, hi = spec.range
        if not (lo <= out <= hi):
            raise bad(f"a value between {lo:g} and {hi:g}")
    return out


def normalize(raw: Mapping[str, Any], source: str, errors: list[str] | None = None) -> dict[str, Any]:
    """Validate a mapping of settings (snake_case or camelCase keys, optionally nested
    under a ``sidecar`` section) and return ``{setting: coerced value}``.

    A ``None`` value means "not set" and is skipped. With ``errors`` None, the first
    unknown key or invalid value raises ConfigError; with a list, each problem is appended
    to it as a message and only that key is dropped, so one bad value never discards the
    rest of its source.
    """
    if "sidecar" in raw and isinstance(raw["sidecar"], Mapping):
        raw = {**{k: v for k, v in raw.items() if k != "sidecar"}, **raw["sidecar"]}
    out: dict[str, Any] = {}
    for k, v in raw.items():
        if v is None or k in _EDITOR_ONLY:
            continue
        key = _ALIASES.get(k, k)
        try:
            if key not in FIELDS or key in _INTERNAL:
                raise ConfigError(f"unknown setting '{k}' from {source} (ignored)")
            _set(out, key, _coerce(key, v, source))
        except ConfigError as exc:
            if errors is None:
                raise
            errors.append(str(exc))
            _refused(out, key, exc)
    return out


def _set(layer: dict[str, Any], key: str, value: Any) -> None:
    layer[key] = value
    if key == "base_url":
        layer.pop(URL_ERROR, None)


def _refused(layer: dict[str, Any], key: str, exc: ConfigError) -> None:
    """Note in ``layer`` that its ``key`` was dropped for ``exc``. A base URL is not
    simply dropped: the layer then says that the user set one that is invalid
    (``Settings.base_url_error``), so that no lower layer's base URL and no default
    host gets the key meant for it."""
    if key == "base_url":
        layer.pop("base_url", None)
        layer[URL_ERROR] = str(exc)


def config_file_path() -> Path:
    """The user config file: ``$SIDECAR_CONFIG`` or ``<platform config dir>/sidecar/config.toml``."""
    env = os.environ.get("SIDECAR_CONFIG")
    if env:
        return Path(env)
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def from_file(path: Path | None = None, errors: list[str] | None = None) -> dict[str, Any]:
    """Read and validate the TOML config file; a missing file gives ``{}``.

    Raises ConfigError when the file is not valid TOML, or (with ``errors`` None) holds
    an invalid setting; see :func:`normalize` for ``errors``.
    """
    path = path or config_file_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return normalize(data, f"config file {path}", errors)


def from_env(environ: Mapping[str, str] | None = None, errors: list[str] | None = None) -> dict[str, Any]:
    """Settings from environment variables (see ``ENV_VARS``, then ``OPENAI_API_KEY`` and
    ``OPENAI_BASE_URL`` where ours left the setting unset). Empty variables are
    ignored; an invalid one raises ConfigError, or with ``errors`` is reported there and
    skipped alone. The result notes which provider the key's variable names
    (``api_key_for``: an ``OPENAI_API_KEY`` alone configures nothing, see
    :attr:`Settings.cloud_provider`; a ``SILICONFLOW_API_KEY`` only feeds
    :attr:`Settings.provider_note`, it never chooses SiliconFlow's request shape)."""
    environ = os.environ if environ is None else environ
    out: dict[str, Any] = {}
    ours: set[str] = set()  # the settings our own variables set, validly or not
    key_var = None
    for var, key in [*ENV_VARS.items(), *OPENAI_ENV_VARS.items()]:
        val = environ.get(var)
        if val:
            if SPECS[key].secret and TYPES[key][0] is str:  # every key variable, even one a later one overrides
                _redact.register_secret(val)
            if var in OPENAI_ENV_VARS and key in ours:
                continue  # OPENAI_* only fill in what our own variables left unset
            if var in ENV_VARS:
                ours.add(key)
            try:
                _set(out, key, _coerce(key, val, f"environment variable {var}"))
            except ConfigError as exc:
                if errors is None:
                    raise
                errors.append(str(exc))
                _refused(out, key, exc)
                continue
            if key == "api_key":
                key_var = var
    owner = P.provider_for_key_env(key_var)
    if owner is not None:
        out["api_key_for"] = owner.name
    return out


def build(*layers: Mapping[str, Any]) -> Settings:
    """Merge already-normalized layers (later wins) over the defaults.

    Raises ConfigError when the merged values contradict each other.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        if "base_url" in layer or URL_ERROR in layer:  # one slot: a valid or a refused base URL
            merged.pop("base_url", None)
            merged.pop(URL_ERROR, None)
        merged.update(layer)
        if "base_url" in layer:
            merged.pop(URL_ERROR, None)
        if "api_key" in layer:  # the key's provider hint follows the layer that set the key
            merged["api_key_for"] = layer.get("api_key_for")
    s = Settings(**merged)
    engine = s.engine
    if s.resolved_mode in ("local", "auto"):
        if not engine.managed and not s.local_url:
            raise ConfigError(
                f"invalid settings: local_engine '{engine.name}' needs local_url (SIDECAR_LOCAL_URL)",
                keys=("local_engine",),
            )
        if engine.needs_model and not s.local_model:
            raise ConfigError(
                f"invalid settings: local_engine '{engine.name}' needs local_model (SIDECAR_LOCAL_MODEL), "
                f"e.g. {engine.model_example}",
                keys=("local_engine",),
            )
    if s.debounce_max_ms is not None and s.debounce_min_ms > s.debounce_max_ms:
        raise ConfigError(
            f"invalid settings: debounce_min_ms ({s.debounce_min_ms}) is above debounce_max_ms ({s.debounce_max_ms})",
            keys=("debounce_min_ms", "debounce_max_ms"),
        )
    return s


def settle(
    layers: Sequence[Mapping[str, Any]], errors: list[str] | None = None, *, names: Sequence[str] = (), fixed: int = 0
) -> list[dict[str, Any]]:
    """``layers`` (lowest first, as :func:`build` takes them) with the settings dropped
    that make them contradict each other, so that :func:`build` accepts them: only the
    settings a contradiction names (``ConfigError.keys``) fall back to the layer below
    or the default, never the rest of their layer. Of the layers that set them, the
    lowest loses first: a higher layer (the environment over the config file) is what
    the user set last. The first ``fixed`` layers are kept as they are (already
    settled). Each drop is one message in ``errors`` naming the contradiction, the
    settings and their layer (``names``, e.g. "the config file"). A contradiction that
    names no setting a layer set drops the editable layers whole, lowest first (never
    seen: a last resort). Raises ConfigError only when the fixed layers contradict."""
    out = [dict(layer) for layer in layers]
    while True:
        try:
            build(*out)
            return out
        except ConfigError as exc:
            at = next(
                (
                    (i, [k for k in exc.keys if k in out[i]])
                    for i in range(fixed, len(out))
                    if any(k in out[i] for k in exc.keys)
                ),
                None,
            )
            if at is None:
                at = next(((i, sorted(out[i])) for i in range(fixed, len(out)) if out[i]), None)
                if at is None:
                    raise
            i, drop = at
            for k in drop:
                out[i].pop(k, None)
                if k == "api_key":
                    out[i].pop("api_key_for", None)
            where = names[i] if i < len(names) else f"settings layer {i + 1}"
            if errors is not None:
                errors.append(f"{exc}; ignored {' and '.join(drop)} from {where}")


def backend_changed(old: Settings, new: Settings) -> bool:
    """Whether going from ``old`` to ``new`` needs a new backend (``BACKEND_FIELDS``).
    ``mode`` counts by what it resolves to: ``mode = "cloud"`` where an unset mode
    already meant the cloud changes nothing (the backends are built from
    ``Settings.resolved_mode``)."""
    if old.resolved_mode != new.resolved_mode:
        return True
    return any(getattr(old, f) != getattr(new, f) for f in BACKEND_FIELDS if f != "mode")


def refused_base_url(message: str, settings: Settings) -> str | None:
    """``message`` (one reported while reading the settings) told the user of the
    invalid base URL that leaves ``settings`` without a cloud backend: the message to
    show instead, saying so and what to do. None for any other message."""
    if settings.base_url_error is None or message != settings.base_url_error:
        return None
    return message + NO_CLOUD
