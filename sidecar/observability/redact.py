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
    r"|whsec_[A-Za-z0-9]{20,}|xapp-[A-Za-z0-9\-]{20,}"  # Stripe webhook secrets, Slack app tokens
    r"|SK[0-9a-f]{32}"  # Twilio API keys
    r"|[0-9]{8,10}:AA[A-Za-z0-9_\-]{30,40}"  # Telegram bot tokens
    r"|[MN][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,40}"  # Discord bot tokens
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
# A URL's scheme and authority (``postgres://user:password@host``): the password is
# masked by ``_sub_url_auth`` (the last ``@`` ends the user info).
_URL_AUTH = re.compile(r"""(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*+://)([^\s/'"?#`]++)""")
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
    return _URL_AUTH.sub(_sub_url_auth, text)


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
# ``"password":``, ``signing_key=``). Strong names mask any literal that is not a
# description; weak ones (``key``, ``token``, ``pass``, ``pw``) only one that looks random.
# Every pattern below starts a match only where a name starts and never backtracks into
# it (possessive quantifiers): a long line costs linear time, not seconds.
_STRONG = re.compile(
    r"(?i)api[_\-]?key|apikey|api[_\-]?secret|access[_\-]?key|secret[_\-]?key|private[_\-]?key"
    r"|account[_\-]?key|signing|hmac|encryption[_\-]?key|master[_\-]?key|access[_\-]?token|auth[_\-]?token"
    r"|refresh[_\-]?token|id[_\-]?token|session[_\-]?token|bearer[_\-]?token|client[_\-]?secret|webhook[_\-]?secret"
    r"|secret|password|passwd|passphrase|pwd|credentials?"
)
_WEAK = re.compile(r"(?i)(?:key|token|pass|pw)(?![a-z])")  # whole words: not ``keyboard``, ``passport``
#: A name ending in one of these describes the value instead of holding a credential
#: (``TOKEN_URL``, ``password_field``, ``SecretId``, ``api_key_header``).
_DESCRIBES = re.compile(
    r"(?i)(?:url|uri|endpoint|path|file|dir|field|name|env|var|header|label|prompt|template|regex|re|pattern"
    r"|hash|hasher|algorithm|alg|strength|type|storage|arn|prefix|suffix|format|length|len|policy|id|ids|message"
    r"|msg|error|title|text|help|hint|placeholder|mode|scheme|method|class|kind|size|count|version|ttl|expiry"
    r"|expires|timeout|location|provider|service|manager|store|vault|column|param|option|ref)$"
)
_LIT = r"""((?:(?!{q})[^\\\r\n]|\\.){{4,}}+){q}"""
# name, a separator, then a quoted literal (JavaScript/Go backquotes included; a Python
# ``rb``/``f`` prefix, C#'s ``@``) or an unquoted value.
_FIELD = re.compile(
    r"""(?<![A-Za-z0-9_.\-])([A-Za-z0-9_.\-]++)(["']?\]?\s*+(?::=|=>|[:=])\s*+(?:[rbuf]{1,2}(?=["'`])|@(?=["']))?)"""
    r"""(?:(["'`])((?:(?!\3)[^\\\r\n]|\\.){4,}+)\3|(?![=:>])([^\s"'`,;&)(\]\[{}<>$]++)(?![\w(.\[]))"""
)
# A credential-named string, then a literal: ``define('DB_PASSWORD', '...')``,
# ``put("password", "...")``, ``getenv("API_KEY", "...")``, ``Map.of(..., "password", "...")``.
_NAME_THEN_LITERAL = re.compile(
    r"""(["'])([A-Za-z0-9_.\-]++)\1(\s*+,\s*+)(["'])((?:(?!\4)[^\\\r\n]|\\.){4,}+)\4(?!\s*:)"""
)
# A setter named after a credential, with a literal: ``setPassword("...")``, ``withApiKey("...")``.
_CALL = re.compile(
    r"""(?<![A-Za-z0-9_])((?:set|with|use|add)[A-Za-z0-9_]*+)(\s*+\(\s*+)(["'])((?:(?!\3)[^\\\r\n]|\\.){4,}+)\3"""
)
# Basic-auth pairs: ``auth=("admin", "...")``, ``HTTPBasicAuth("admin", "...")``.
_AUTH_PAIR = re.compile(
    r"""(?<![A-Za-z0-9_])([A-Za-z0-9_]*+)(\s*+(?:=\s*+\(|\()\s*+(["'])[^"'\r\n]*+\3\s*+,\s*+)"""
    r"""(["'])((?:(?!\4)[^\\\r\n]|\\.){4,}+)\4"""
)
# A query parameter: ``?password=...``, ``&api_key=...``, ``?access_token=...``, ``&sig=...``.
_QUERY = re.compile(r"""([?&])([A-Za-z0-9_\-]++)=([^&\s"'`#]++)""")
# A shell or .env line: ``export DB_PASSWORD=hunter2``.
_ENV_LINE = re.compile(r"""(?m)^(\s*+(?:export\s++)?)([A-Z][A-Z0-9_]*+)=([^\s$'"(]\S*+)""")
# Secrets inside connection strings: ``...;AccountKey=...;``, ``"Password=...;``.
_CONN_PART = re.compile(
    r"(?i)([;\"']\s*+(?:AccountKey|SharedAccessKey|SharedAccessSignature|Password|Pwd)\s*+=\s*+)([^;\"'&\s]++)"
)
# A credential element: ``<password>...</password>``.
_XML_FIELD = re.compile(r"<([A-Za-z0-9_\-]++)>([^<\s][^<]*+)</\1>")
# A credential flag: ``--password ...``, ``--token=...``.
_CLI_FLAG = re.compile(r"(?i)(--(?:password|passwd|token|api-?key|secret|client-secret)[= ]\s*+)([^\s\"'$-][^\s\"']*+)")
# ``Bearer``/``Basic`` with a literal credential, ``curl -u user:pass``.
_AUTH_LITERAL = re.compile(rf"(\b(?:Bearer|Basic|Token)\s++)([{_TOKEN_CHARS}]{{12,}}+)")
_CURL_USER = re.compile(r"""((?:\s-u|--user)\s++["']?[^:\s"']++:)([^\s"']++)""")
#: A dotted name (``sidecar.apiKey``, ``os.environ``): a setting's or command's name, not a credential.
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*+(?:\.[A-Za-z0-9_\-]++)++$")
#: An environment variable's or constant's name (``OPENAI_API_KEY``), a header name (``X-API-Key``).
_NAME_LIKE = re.compile(r"^(?:[A-Z][A-Z0-9]*+(?:_[A-Z0-9]++)++|X-[A-Za-z0-9\-]++)$")
#: Words that name a credential field rather than hold one (``"password"``, ``access_token``).
_FIELD_WORDS = frozenset(
    "password passwd pwd pass passphrase secret token key api_key apikey access_token refresh_token id_token"
    " client_secret credentials credential access_key secret_key private_key bearer basic".split()
)
#: Description-like values: a URL without user info, a path, an ARN.
_DESCRIPTIVE = re.compile(r"^(?:[a-z][a-z0-9+.\-]*+://[^@\s]*+$|arn:|/|\./|~/|[a-z0-9_\-]++(?:/[a-z0-9_\-.]++)++$)")
_SNAKE = re.compile(r"_?[A-Za-z][A-Za-z0-9]*+(?:_[A-Za-z0-9]++)++")


def _strength(name: str) -> str:
    """``"strong"``, ``"weak"`` or ``""``: what the credential words in ``name`` say."""
    if _STRONG.search(name):
        return "strong"
    return "weak" if _WEAK.search(name) else ""


def _not_a_secret(name: str, value: str, strong: bool) -> bool:
    """Whether ``value`` given to ``name`` is a description, a name or a placeholder."""
    v = value.strip()
    ident = re.split(r"[^A-Za-z0-9_]+", name)[-1] if name else ""
    if (
        v.lower() in _PLACEHOLDERS
        or v.lower() in _FIELD_WORDS
        or v.startswith(("${", "{", "%(", "<", "$"))
        or v.strip("*") == ""
        or _DOTTED.match(v)
        or _NAME_LIKE.match(v)
        or _DESCRIPTIVE.match(v)
        or (ident and _DESCRIBES.search(ident))
    ):
        return True
    if strong:  # prose is not a password (a passphrase may be words)
        return "passphrase" not in ident.lower() and (" " in v and len(v) > 24 or v.count(" ") >= 2)
    return " " in v or "." in v or not _random_looking(v, min_len=8) or ("/" in v and len(v) < 24)


def _quoted(head: str, quote: str, value: str, name: str, strength: str) -> str | None:
    """The masked literal, or None to keep it."""
    if not strength or _not_a_secret(name, value, strength == "strong"):
        return None
    return f"{head}{quote}{MASK}{quote}"


def _sub_code_field(m: re.Match[str]) -> str:
    name, sep = m.group(1), m.group(2)
    strength = _strength(name)
    if m.group(3) is not None:
        out = _quoted(name + sep, m.group(3), m.group(4), name, strength)
        return m.group(0) if out is None else out
    value = m.group(5)
    # Unquoted: only after a strong name, and not an expression or a variable of code.
    if (
        strength != "strong"
        or value.isdigit()
        or _SNAKE.fullmatch(value)
        or _not_a_secret(name, value, True)
        or (not any(c.isdigit() for c in value) and not re.search(r"[^A-Za-z0-9_]", value) and len(value) < 20)
    ):
        return m.group(0)
    return name + sep + MASK


def _sub_name_then_literal(m: re.Match[str]) -> str:
    name = m.group(2)
    out = _quoted(m.group(1) + name + m.group(1) + m.group(3), m.group(4), m.group(5), name, _strength(name))
    return m.group(0) if out is None else out


def _sub_call(m: re.Match[str]) -> str:
    name = m.group(1)
    if not _STRONG.search(name):
        return m.group(0)
    out = _quoted(name + m.group(2), m.group(3), m.group(4), "", "strong")
    return m.group(0) if out is None else out


def _sub_auth_pair(m: re.Match[str]) -> str:
    name = m.group(1)
    if not (name == "auth" or name.endswith("Auth")):
        return m.group(0)
    out = _quoted(name + m.group(2), m.group(4), m.group(5), "", "strong")
    return m.group(0) if out is None else out


def _sub_query(m: re.Match[str]) -> str:
    name = m.group(2)
    if m.group(3) == MASK or not (name.lower() == "sig" or _STRONG.search(name) or _WEAK.search(name)):
        return m.group(0)
    return f"{m.group(1)}{name}={MASK}"


def _sub_env_line(m: re.Match[str]) -> str:
    if not re.search(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD|PASS", m.group(2)):
        return m.group(0)
    return f"{m.group(1)}{m.group(2)}={MASK}"


def _sub_xml(m: re.Match[str]) -> str:
    if not _STRONG.search(m.group(1)) or _not_a_secret(m.group(1), m.group(2), True):
        return m.group(0)
    return f"<{m.group(1)}>{MASK}</{m.group(1)}>"


def _sub_url_auth(m: re.Match[str]) -> str:
    authority = m.group(2)
    if "@" not in authority:
        return m.group(0)
    userinfo, host = authority.rsplit("@", 1)
    if ":" not in userinfo:
        return m.group(0)
    user = userinfo.split(":", 1)[0]
    return f"{m.group(1)}{user}:{MASK}@{host}"


def redact_code(text: str) -> str:
    """A snippet of source code without credentials, for a prompt that leaves the machine
    (``completion/stream.py``, cloud backends). Unlike :func:`redact` (made for logs) it
    leaves code alone: it masks *values* only, so ``secret = hashlib.sha256(x)``,
    ``f"Bearer {token}"`` or ``tokens = tokenize(line)`` reach the model as written, and
    a value that describes (``TOKEN_URL = "https://..."``, ``password_field = "password"``,
    ``"Enter your password"``, ``"X-API-Key"``) is kept. Linear in the text's length.

    Masked, each replaced by ``***``: the registered values; PEM private-key blocks;
    well-known key shapes (OpenAI, Anthropic, Stripe, GitHub, GitLab, npm, Hugging Face,
    Slack, AWS, Google, SendGrid, Twilio, Telegram, Discord keys, JSON Web Tokens, Slack
    webhook URLs); a URL's password and credential query parameters; a literal assigned or
    passed to a credential name (``password = "..."``, ``"api_key": "..."``,
    ``client_secret="..."``, ``os.environ["API_KEY"] = "..."``, ``define('DB_PASSWORD',
    '...')``, ``put("password", "...")``, ``getenv("API_KEY", "...")``,
    ``setPassword("...")``, ``auth=("user", "...")``; ``key``/``token``/``pass`` only when
    the literal looks random); an unquoted value after a credential name that looks like
    one (``password=hunter2pass`` in a libpq string, a .properties/.env line);
    ``NAME_TOKEN=`` lines of shell files; connection-string parts (``AccountKey=``,
    ``Password=``); ``<password>`` elements; ``--password`` flags; ``Bearer``/``Basic``
    followed by a literal credential; ``curl -u user:pass``. Known gaps: triple-quoted and
    parenthesised literals, unquoted YAML values."""
    if not text:
        return text
    text = _PREFIXED.sub(_sub_prefixed, _redact_common(text))
    text = _FIELD.sub(_sub_code_field, text)
    text = _NAME_THEN_LITERAL.sub(_sub_name_then_literal, text)
    text = _CALL.sub(_sub_call, text)
    text = _AUTH_PAIR.sub(_sub_auth_pair, text)
    text = _QUERY.sub(_sub_query, text)
    text = _ENV_LINE.sub(_sub_env_line, text)
    text = _CONN_PART.sub(lambda m: m.group(1) + MASK, text)
    text = _XML_FIELD.sub(_sub_xml, text)
    text = _CLI_FLAG.sub(lambda m: m.group(1) + MASK, text)
    text = _AUTH_LITERAL.sub(
        lambda m: m.group(1) + MASK if _random_looking(m.group(2), min_len=12) else m.group(0), text
    )
    return _CURL_USER.sub(lambda m: m.group(1) + MASK, text)


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
