"""Strict JSON for everything the sidecar writes (LSP frames, the stats file, the JSON
log file): RFC 8259 has no NaN or Infinity, and strict parsers (most of them, and
``jq``) reject the bare ``NaN`` that Python's ``json.dumps`` writes by default. A number
that is not finite is written as ``null`` ("no figure"), never as an error: a figure
that went wrong must not take the stats, a log record or an LSP answer with it.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """``obj`` with every float that is not finite (NaN, +-Infinity) replaced by None,
    through dicts, lists and tuples (tuples become lists, as JSON writes them). Other
    values are returned as they are; an object without a non-finite float is returned
    itself, not copied."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        pairs = [(_key(k), finite(v)) for k, v in obj.items()]
        if all(k2 is k and v2 is v for (k2, v2), (k, v) in zip(pairs, obj.items())):
            return obj
        return dict(pairs)
    if isinstance(obj, (list, tuple)):
        items = [finite(v) for v in obj]
        if isinstance(obj, list) and all(a is b for a, b in zip(items, obj)):
            return obj
        return items
    return obj


def _key(k: Any) -> Any:
    """A dict key as JSON can write it strictly (a float key that is not finite: its name)."""
    return str(k) if isinstance(k, float) and not math.isfinite(k) else k


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that writes strict JSON: non-finite floats become ``null``
    (:func:`finite`), and ``allow_nan=False`` guards what a ``default`` hook returns."""
    default = kw.pop("default", None)
    if default is not None:
        kw["default"] = lambda o: finite(default(o))
    return json.dumps(finite(obj), allow_nan=False, **kw)


def has_bare_constant(body: bytes) -> bool:
    """Whether a JSON text may hold a bare ``NaN`` / ``Infinity`` (a cheap test on the
    bytes: it also matches those words inside strings, which :func:`strict_bytes` then
    leaves as they are)."""
    return b"NaN" in body or b"Infinity" in body


def strict_bytes(body: bytes) -> bytes:
    """A JSON text (UTF-8) rewritten as strict JSON when it holds a bare ``NaN`` or
    ``Infinity``; else (or when it is not JSON at all) ``body`` itself. Never raises."""
    if not has_bare_constant(body):
        return body
    found: list[str] = []

    def constant(token: str) -> float:
        found.append(token)
        return float(token.replace("Infinity", "inf"))

    try:
        value = json.loads(body.decode("utf-8"), parse_constant=constant)
        if not found:
            return body
        return json.dumps(finite(value), allow_nan=False).encode("utf-8")
    except (ValueError, TypeError, RecursionError):
        return body
