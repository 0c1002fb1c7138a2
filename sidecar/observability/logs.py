"""Structured logs: JSON lines in the platform log directory, one trace ID per completion.

Every record carries ``trace_id``: the ID of the inline completion being served (set by
the scheduler for the request and inherited by the tasks it starts, through a
``contextvars`` variable), so one completion can be followed from keystroke to backend;
the backend's own trace ID (SiliconFlow's ``x-siliconcloud-trace-id``) is logged with it
when the stream ends. The sidecar never logs document text or the API key (every record
passes through ``redact``); at the default level (``warning``) only problems are written
at all.
"""

from __future__ import annotations

import contextvars
import logging
import logging.handlers
import uuid
from pathlib import Path

import platformdirs

from .redact import protect, redact, redact_obj
from .strictjson import dumps

trace_id: contextvars.ContextVar[str] = contextvars.ContextVar("sidecar_trace_id", default="")

MAX_BYTES = 5 * 1024 * 1024
BACKUPS = 3


def new_trace_id() -> str:
    """A fresh 16-hex-character trace ID, set as the current one; returns it."""
    tid = uuid.uuid4().hex[:16]
    trace_id.set(tid)
    return tid


def default_log_file() -> Path:
    """``<platform log dir>/sidecar/sidecar.jsonl``."""
    return Path(platformdirs.user_log_dir("sidecar")) / "sidecar.jsonl"


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per line: ts (unix s), level, logger, msg, trace_id, and any
    ``extra={"fields": {...}}`` given to the log call."""

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact(record.getMessage()),
            "trace_id": trace_id.get(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(redact_obj(fields))
        if record.exc_text:
            out["exc"] = redact(record.exc_text)
        elif record.exc_info:
            out["exc"] = redact(self.formatException(record.exc_info))
        # Strict JSON: a field that is NaN or infinite is written as null.
        return dumps(out, ensure_ascii=False, default=lambda o: redact(str(o)))


def add_json_file(path: Path | None = None) -> Path | None:
    """Attach a rotating JSON-lines handler (5 MB x 3) to the root logger. Returns the
    path, or None (with a warning on stderr) when the file cannot be opened."""
    path = path or default_log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8")
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write the log file %s: %s", path, exc)
        return None
    handler.setFormatter(JsonLinesFormatter())
    protect(handler)
    logging.getLogger().addHandler(handler)
    return path
