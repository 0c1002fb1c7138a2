"""The one redaction step: secrets never leave the process.

Every text that goes out (log records to stderr and to the JSON-lines file, messages
shown to or logged in the editor, upstream error texts, ``sidecar doctor`` output, and as
a last net every frame written to stdout) passes through :func:`redact`. It removes:

- every *registered* secret value (the configured API key: ``Settings`` registers it when
  built, ``config.from_env`` registers the key variables it reads), wherever it appears;
- anything shaped like a credential, whether or not it is ours: an ``Authorization:``
  header value, a ``Bearer <token>``, well-known key prefixes (``sk-...``, ``ghp_...``,
  ``hf_...``, ``AKIA...``, ``xox?-...``), the value of a secret-named field
  (``api_key=...``, ``"api_key": "..."``, ``X-Api-Key: ...``, ``password=...``,
  ``client_secret=...``), a long random-looking string after the words key, token
  or secret, the password in a URL (``scheme://user:password@host``), and a PEM private-key block (``-----BEGIN ... PRIVATE KEY-----`` to its
  ``END`` line, or to the end of a text cut short inside it).

Being reasonable about ordinary words: shaped matches need a token-like value (long
enough and, unless very long, with digits), so ``Bearer authentication``, ``sort
key=len``, ``"api_key": "present"``, ``api_key=settings.api_key`` or ``sk-learn`` are
left alone. The stdout net uses only the registered values (exact strings), so completion
text is never altered by a pattern.
"""

from __future__ import annotations

import io
import logging
import re
import threading
from collections.abc import Iterable
from typing import Any

MASK = "***"
#: Registered values shorter than this are not redacted (a 3-letter "key" would blank
#: ordinary words everywhere); shaped matches still catch them in context.
MIN_SECRET_LEN = 8

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()  # longest first; replaced copy-on-write
_secret_bytes: tuple[bytes, ...] = ()


def register_secret(value: object) -> None:
    """Redact ``value`` from now on (a no-op for None, non-strings and short values)."""
    global _secrets, _secret_bytes
    if not isinstance(value, str):
        return
    value = value.strip()
    if len(value) < MIN_SECRET_LEN or value in _secrets:
        return
    with _lock:
        if value in _secrets:
            return
        _secrets = tuple(sorted((*_secrets, value), key=len, reverse=True))
        _secret_bytes = tuple(s.encode("utf-8", "surrogatepass") for s in _secrets)


def registered() -> tuple[str, ...]:
    return _secrets


# ------------------------------------------------------------------ shapes
_TOKEN_CHARS = r"A-Za-z0-9\-._~+/="
_PLACEHOLDERS = {
    "",
    "***",
    "none",
    "null",
    "nil",
    "true",
    "false",
    "present",
    "absent",
    "set",
    "unset",
    "redacted",
    "hidden",
    "yes",
    "no",
    "missing",
    "empty",
    "required",
    "optional",
    "string",
    "str",
    "xxx",
}

# Authorization / Proxy-Authorization header values (``Authorization: Bearer x``,
# ``{"Authorization": "Bearer x"}``, ``{'authorization': 'Basic x'}``).
_AUTH_HEADER = re.compile(
    r"""(?i)(\b(?:proxy-)?authorization["']?\s*[:=]\s*["']?)"""
    r"""((?:(?:bearer|basic|token|digest|apikey|bot)\s+)?[^\s"',;<>(){}\[\]\\]+)"""
)
# ``Bearer <token>`` anywhere.
_BEARER = re.compile(rf"(?i)(\bbearer\s+)([{_TOKEN_CHARS}]+)")
# Well-known key shapes.
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9_\-])("
    r"sk-[A-Za-z0-9_\-]{12,}"
    r"|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{12,}"  # Stripe secret and restricted keys
    r"|(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"  # GitLab
    r"|npm_[A-Za-z0-9]{30,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access keys, long-term and temporary
    r"|AIza[0-9A-Za-z_\-]{30,}"
    r"|SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"  # SendGrid
    r"|eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"  # a JSON Web Token
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/]+"
    r")"
)
# A field whose name says it holds a secret, and its value (quoted or not).
_SECRET_FIELD = re.compile(
    r"""(?i)(\b[A-Za-z0-9_\-]*?"""
    r"""(?:api[_\-]?key|apikey|access[_\-]?key|secret[_\-]?key|private[_\-]?key|access[_\-]?token|auth[_\-]?token"""
    r"""|refresh[_\-]?token|id[_\-]?token|session[_\-]?token|client[_\-]?secret|secret|password|passwd|token)"""
    r"""["']?\s*[:=]\s*)(?:(["'])((?:[^"'\\\r\n]|\\.)*)\2|([^\s"',;&<>(){}\[\]\\]+))"""
)
# A PEM private-key block (RSA, EC, DSA, OpenSSH, PKCS#8, encrypted), whole; one cut
# short (a snippet that ends inside it) to the end of the text.
_PRIVATE_KEY = re.compile(r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----.*?(?:-----END \1-----|\Z)", re.S)
# The password of a URL's user info (``postgres://user:password@host``).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@'\"]*:)([^\s/'\"]+)(@[^\s@/'\"]+)")
# The words key / token / secret followed (after a colon, equals sign or space) by a
# long random-looking string.
_KEYWORD_VALUE = re.compile(
    rf"""(?i)(\b(?:keys?|tokens?|secrets?|credentials?)\b["']?\s*[:=]?\s*["']?)([{_TOKEN_CHARS}]{{16,}})"""
)


def _random_looking(value: str, *, min_len: int) -> bool:
    """Long enough and token-like: letters and digits both, or very long and mixed case."""
    if len(value) < min_len or value.strip("*") == "":
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    if has_digit and has_alpha:
        return True
    return len(value) >= 32 and any(c.isupper() for c in value) and any(c.islower() for c in value)


def _field_value_is_secret(value: str, quoted: bool) -> bool:
    v = value.strip()
    if v.lower() in _PLACEHOLDERS or v.strip("*") == "" or v.startswith(("<", "${", "$", "{", "%(")):
        return False
    if quoted:
        return len(v) >= 4
    if v.isdigit():  # counts and sizes (max_tokens=64, "token": 1234567)
        return False
    # Unquoted: an identifier or attribute path without digits is code, not a secret.
    if re.fullmatch(r"[A-Za-z_][A-Za-z_.]*(\(\))?", v):
        return False
    return len(v) >= 6


def _sub_auth(m: re.Match[str]) -> str:
    return m.group(1) + MASK if m.group(2).strip("*") else m.group(0)


def _sub_bearer(m: re.Match[str]) -> str:
    tok = m.group(2)
    return m.group(1) + MASK if _random_looking(tok, min_len=8) or len(tok) >= 24 else m.group(0)


def _sub_prefixed(m: re.Match[str]) -> str:
    tok = m.group(1)
    if tok.startswith("sk-") and not _random_looking(tok[3:], min_len=12):
        return tok
    return MASK


def _sub_field(m: re.Match[str]) -> str:
    head, quote, qval, bare = m.group(1), m.group(2), m.group(3), m.group(4)
    if quote is not None:
        return f"{head}{quote}{MASK}{quote}" if _field_value_is_secret(qval, True) else m.group(0)
    return head + MASK if _field_value_is_secret(bare, False) else m.group(0)


def _sub_keyword(m: re.Match[str]) -> str:
    return m.group(1) + MASK if _random_looking(m.group(2), min_len=20) else m.group(0)


def _redact_common(text: str) -> str:
    """What both kinds of text lose: the registered values, PEM private-key blocks and
    URL passwords."""
    for s in _secrets:
        if s in text:
            text = text.replace(s, MASK)
    text = _PRIVATE_KEY.sub(lambda m: f"-----BEGIN {m.group(1)}-----{MASK}-----END {m.group(1)}-----", text)
    return _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + m.group(3), text)


def redact(text: str, extra: Iterable[str | None] = ()) -> str:
    """``text`` without registered secrets, the ``extra`` values, or credential shapes."""
    if not text:
        return text
    if not isinstance(text, str):
        text = str(text)
    for s in sorted((e for e in extra if isinstance(e, str) and len(e.strip()) >= 4), key=len, reverse=True):
        text = text.replace(s.strip(), MASK)
    text = _redact_common(text)
    text = _AUTH_HEADER.sub(_sub_auth, text)
    text = _BEARER.sub(_sub_bearer, text)
    text = _PREFIXED.sub(_sub_prefixed, text)
    text = _SECRET_FIELD.sub(_sub_field, text)
    text = _KEYWORD_VALUE.sub(_sub_keyword, text)
    return text


# ------------------------------------------------------------------ source code
# Names that say a value is a credential, in code (``API_KEY``, ``self.client_secret``,
# ``"password":``, ``signing_key=``). Strong names mask any literal; weak ones (``key``,
# ``token``, ``pass``) only one that looks random.
_STRONG = (
    r"api[_\-]?key|apikey|api[_\-]?secret|access[_\-]?key|secret[_\-]?key|private[_\-]?key(?:[_\-]?id)?"
    r"|account[_\-]?key|signing[_\-]?key|encryption[_\-]?key|master[_\-]?key|access[_\-]?token|auth[_\-]?token"
    r"|refresh[_\-]?token|id[_\-]?token|session[_\-]?token|bearer[_\-]?token|client[_\-]?secret|webhook[_\-]?secret"
    r"|secret|password|passwd|passphrase|pwd|credentials?"
)
_WEAK = r"key|token|pass"
# name (word characters around it), an assignment or key-value separator, a quoted literal.
_CODE_FIELD = re.compile(
    rf"""(?i)(?<![A-Za-z0-9])([A-Za-z0-9_]*?(?:({_STRONG})|{_WEAK})[A-Za-z0-9_]*["']?\s*(?::=|=>|[:=])\s*[rbuf]?)"""
    r"""(["'])((?:[^"'\\\r\n]|\\.){4,})\3"""
)
# A setter or call named after a credential, with a literal: ``setPassword("...")``.
_CODE_CALL = re.compile(
    rf"""(?i)(\b[A-Za-z0-9_]*(?:{_STRONG})[A-Za-z0-9_]*\s*\(\s*)(["'])((?:[^"'\\\r\n]|\\.){{4,}})\2"""
)
# An environment lookup with a literal default: ``getenv("API_KEY", "...")``.
_ENV_DEFAULT = re.compile(
    r"""((?:getenv|get|fetch|env)\s*\(\s*["'][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|PASS)[A-Za-z0-9_]*["']\s*,\s*)"""
    r"""(["'])((?:[^"'\\\r\n]|\\.){4,})\2"""
)
# A shell or .env line: ``export DB_PASSWORD=hunter2``.
_ENV_LINE = re.compile(
    r"(?m)^(\s*(?:export\s+)?[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|PASS)[A-Z0-9_]*=)([^\s$'\"(][^\s]*)"
)
# Secrets inside connection strings and URLs: ``...;AccountKey=...;``, ``?sig=...``.
_CONN_PART = re.compile(
    r"(?i)([;\"']\s*(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)\s*=\s*|[?&]sig=)([^;\"'&\s]+)"
)
# ``Bearer``/``Basic`` with a literal credential, ``curl -u user:pass``.
_AUTH_LITERAL = re.compile(rf"(\b(?:Bearer|Basic|Token)\s+)([{_TOKEN_CHARS}]{{12,}})")
_CURL_USER = re.compile(r"""((?:\s-u|--user)\s+["']?[^:\s"']+:)([^\s"']+)""")


#: A dotted name (``sidecar.apiKey``, ``os.environ``): a setting's or command's name, not a credential.
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")


def _sub_code_field(m: re.Match[str]) -> str:
    value = m.group(4)
    strong = m.group(2) is not None
    if (
        value.lower() in _PLACEHOLDERS
        or value.startswith(("${", "{", "%(", "<"))
        or value.strip("*") == ""
        or _DOTTED.match(value)
    ):
        return m.group(0)
    if not strong and (" " in value or not _random_looking(value, min_len=12)):
        return m.group(0)
    return f"{m.group(1)}{m.group(3)}{MASK}{m.group(3)}"


def _sub_literal(m: re.Match[str]) -> str:
    value = m.group(3)
    if value.lower() in _PLACEHOLDERS or value.startswith(("${", "{", "%(", "<")):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}{MASK}{m.group(2)}"


def redact_code(text: str) -> str:
    """A snippet of source code without credentials, for a prompt that leaves the machine
    (``completion/stream.py``, cloud backends). Unlike :func:`redact` (made for logs) it
    leaves code alone: it masks *literals* only, so ``secret = hashlib.sha256(x)``,
    ``f"Bearer {token}"`` or ``tokens = tokenize(line)`` reach the model as written.

    Masked, each replaced by ``***``: the registered values; PEM private-key blocks;
    well-known key shapes (OpenAI/Stripe/GitHub/GitLab/npm/Hugging Face/Slack/AWS/Google/
    SendGrid keys, JSON Web Tokens, Slack webhook URLs); a URL's password; a quoted literal
    assigned to a credential name (``password = "..."``, ``"api_key": "..."``,
    ``client_secret="..."``; ``key``/``token``/``pass`` only when the literal looks random);
    a literal passed to a credential-named call (``setPassword("...")``) or given as an
    environment lookup's default (``getenv("API_KEY", "...")``); ``NAME_TOKEN=value`` lines
    of shell and ``.env`` files; connection-string parts (``AccountKey=``, ``Password=``,
    ``sig=``); ``Bearer``/``Basic`` followed by a literal credential; ``curl -u user:pass``."""
    if not text:
        return text
    text = _PREFIXED.sub(_sub_prefixed, _redact_common(text))
    text = _CODE_FIELD.sub(_sub_code_field, text)
    text = _CODE_CALL.sub(_sub_literal, text)
    text = _ENV_DEFAULT.sub(_sub_literal, text)
    text = _ENV_LINE.sub(lambda m: m.group(1) + MASK, text)
    text = _CONN_PART.sub(lambda m: m.group(1) + MASK, text)
    text = _AUTH_LITERAL.sub(
        lambda m: m.group(1) + MASK if _random_looking(m.group(2), min_len=12) else m.group(0), text
    )
    text = _CURL_USER.sub(lambda m: m.group(1) + MASK, text)
    return text


def redact_registered_bytes(data: bytes) -> bytes:
    """``data`` without the registered values (exact strings only): the stdout net."""
    for s in _secret_bytes:
        if s in data:
            data = data.replace(s, MASK.encode())
    return data


def redact_obj(obj: Any) -> Any:
    """``obj`` with :func:`redact` applied to every string in it (dicts, lists, tuples)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v) for v in obj)
    return obj


# ------------------------------------------------------------------ logging
class RedactFilter(logging.Filter):
    """A handler filter that redacts the record in place (message, arguments, exception and
    stack text, and ``extra={"fields": ...}``); it never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: keep what we can
            msg = f"{record.msg} {record.args}"
        record.msg, record.args = redact(msg), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            record.fields = redact_obj(fields)
        return True


def protect(handler: logging.Handler) -> logging.Handler:
    """Give ``handler`` the redaction filter (once); returns it."""
    if not any(isinstance(f, RedactFilter) for f in handler.filters):
        handler.addFilter(RedactFilter())
    return handler


class RedactingStream(io.TextIOBase):
    """A text stream in front of ``stream`` (stderr) that writes whole lines redacted.

    A partial line waits for its end or the next ``flush()``; everything else (``fileno``,
    ``buffer``, ``encoding``...) is the wrapped stream's.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = ""
        self._wlock = threading.RLock()

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            s = str(s)
        with self._wlock:
            data = self._pending + s
            cut = data.rfind("\n") + 1
            self._pending = data[cut:]
            if len(self._pending) > 65536:  # no newline for a long time: write it anyway
                cut, self._pending = len(data), ""
            if cut:
                self._stream.write(redact(data[:cut]))
        return len(s)

    def flush(self) -> None:
        with self._wlock:
            if self._pending:
                pending, self._pending = self._pending, ""
                self._stream.write(redact(pending))
            try:
                self._stream.flush()
            except (OSError, ValueError):
                pass

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return bool(getattr(self._stream, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self._stream, "errors", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
