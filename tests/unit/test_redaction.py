"""Secrets never leave: the redactor, the logging handlers and upstream errors. The real
session whose backend echoes the request headers in its error body is
tests/e2e/test_redaction_e2e.py."""

from __future__ import annotations

import io
import json
import logging
import secrets

import pytest

from sidecar import config
from sidecar.backends.errors import BackendError, classify
from sidecar.observability import logs, redact
from sidecar.observability.redact import RedactFilter, RedactingStream

pytestmark = pytest.mark.timeout(60)

REGISTERED = "my-configured-value-7f3a9c"


@pytest.fixture(autouse=True)
def _registered():
    redact.register_secret(REGISTERED)
    yield


# ------------------------------------------------------------------ the redactor
LEAKS = [
    # (text, the secret part that must be gone)
    ("Authorization: Bearer sk-abcdefghijklmnop1234", "sk-abcdefghijklmnop1234"),
    ("authorization: Bearer short1", "short1"),
    ('{"headers": {"Authorization": "Bearer abc", "Accept": "*/*"}}', "Bearer abc"),
    ("{'authorization': 'Basic dXNlcjpwYXNz'}", "dXNlcjpwYXNz"),
    ("Proxy-Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
    ("got bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl from the cache", "eyJhbGciOiJIUzI1NiJ9"),
    ("invalid key sk-canary-0123456789abcdef", "sk-canary-0123456789abcdef"),
    ("(sk-proj-AbCdEf0123456789xyz)", "sk-proj-AbCdEf0123456789xyz"),
    ("api_key=abcd1234efgh&model=x", "abcd1234efgh"),
    ("https://gw.example/v1?api-key=abcd1234efgh", "abcd1234efgh"),
    ('{"api_key": "sk-whatever"}', "sk-whatever"),
    ("{'apiKey': 'hunter22'}", "hunter22"),
    ("SILICONFLOW_API_KEY=zzzzzzzzzz99", "zzzzzzzzzz99"),
    ("X-Api-Key: 0123456789abcdef", "0123456789abcdef"),
    ("password=hunter2", "hunter2"),
    ("client_secret: 'shh-it-is-me'", "shh-it-is-me"),
    ('{"access_token": "ya29.a0AfH6SMBx"}', "ya29.a0AfH6SMBx"),
    ("token: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"),
    ("secret Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA", "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"),
    ("ghp_" + "a1" * 18, "a1" * 18),
    ("AKIAIOSFODNN7EXAMPLE in the env", "AKIAIOSFODNN7EXAMPLE"),
    ("hf_" + "Ab3" * 10, "Ab3" * 10),
    (f"the value {REGISTERED} appears", REGISTERED),
    (f"glued:{REGISTERED}:here", REGISTERED),
]

KEPT = [
    "Bearer authentication is required",
    "sk-learn is a library; risk-assessment-2024-final-report",
    '"api_key": "present"',
    '{"api_key": null, "model": "Qwen/Qwen2.5-Coder-7B-Instruct"}',
    "api_key=settings.api_key",
    "token = os.environ['TOKEN']",
    "sort(key=len)",
    "max_tokens=64 prefix_tokens: 1024 suffix_tokens=256",
    '{"max_tokens": 64, "token_count": 123456}',
    "def f(token): return token.upper()",
    "SiliconFlow needs an API key: set SILICONFLOW_API_KEY (or api_key in the config file).",
    "siliconflow rejected the API key (HTTP 401). Check SILICONFLOW_API_KEY, and that the key belongs "
    "to this host (.cn keys work only with api.siliconflow.cn, .com keys with .com).",
    "cache file /home/u/.cache/sidecar/completions.sqlite3 is unreadable",
    "passwords are hashed; secret sauce; the key was rejected",
    "cache key 3fa4",
    "upstream stream ended trace_id=0123456789abcdef ttft_ms=120",
    "https://api.siliconflow.cn/v1/completions",
    "Authorization: ***",
    "api_key=***",
]


@pytest.mark.parametrize("text, secret", LEAKS)
def test_redacts(text, secret):
    out = redact.redact(text)
    assert secret not in out, out
    assert redact.MASK in out
    assert redact.redact(out) == out  # idempotent


@pytest.mark.parametrize("text", KEPT)
def test_keeps_ordinary_text(text):
    assert redact.redact(text) == text


def test_extra_values_and_short_registrations():
    assert redact.redact("key abcd here", ["abcd"]) == "key *** here"
    redact.register_secret("abc")  # too short to redact everywhere
    assert redact.redact("abc def") == "abc def"
    redact.register_secret(None)


def test_settings_register_the_configured_key():
    key = f"sk-registered-{secrets.token_hex(8)}"
    config.build({"api_key": key})
    assert key in redact.registered()
    env_key = f"plain{secrets.token_hex(8)}"  # not key-shaped: only the registration finds it
    config.from_env({"SIDECAR_API_KEY": env_key, "SILICONFLOW_API_KEY": "other-" + env_key})
    assert redact.redact(f"x {env_key} y") == "x *** y"


def test_json_stays_json():
    text = json.dumps({"a": 'Authorization: Bearer abc123def456"x', "password": 'ab"cd', "n": 1})
    out = redact.redact(text)
    assert json.loads(out)["password"] == "***" and "abc123def456" not in out


def test_backend_errors_are_redacted():
    body = json.dumps({"code": 50500, "message": f"echo: Authorization: Bearer {REGISTERED} x-api-key={REGISTERED}"})
    err = classify(500, body.encode(), backend="gw", model="m")
    assert REGISTERED not in err.message and REGISTERED not in err.detail and "HTTP 500" in err.message
    # Cut after redaction: a secret straddling the 300-character cut leaves no prefix.
    long_body = ("x" * 290 + " sk-straddle-0123456789abcdef").encode()
    err = classify(502, long_body, backend="gw", model="m")
    assert "sk-str" not in err.message
    direct = BackendError("unknown", f"boom {REGISTERED}", detail=f"Bearer {REGISTERED}")
    assert REGISTERED not in direct.message + direct.detail


def test_log_handlers_redact_message_args_exception_and_fields(tmp_path):
    secret = f"sk-logged-{secrets.token_hex(8)}"
    redact.register_secret(secret)
    stream = io.StringIO()
    stderr_handler = redact.protect(logging.StreamHandler(stream))
    stderr_handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    path = logs.add_json_file(tmp_path / "log.jsonl")
    root = logging.getLogger()
    json_handler = root.handlers[-1]
    root.addHandler(stderr_handler)
    log = logging.getLogger("sidecar.test_redaction")
    try:
        log.warning(
            "upstream said %s", f"Authorization: Bearer {secret}", extra={"fields": {"hdr": f"Bearer {secret}"}}
        )
        try:
            raise RuntimeError(f"body echoes api_key={secret}")
        except RuntimeError:
            log.exception("failed")
    finally:
        root.removeHandler(stderr_handler)
        root.removeHandler(json_handler)
        json_handler.close()
    out = stream.getvalue()
    text = path.read_text()
    assert "upstream said" in out and "RuntimeError" in out and secret not in out
    assert "upstream said" in text and "RuntimeError" in text and secret not in text
    assert all(json.loads(line) for line in text.splitlines())
    assert any(isinstance(f, RedactFilter) for f in json_handler.filters)


def test_redacting_stream_lines_and_flush():
    buf = io.StringIO()
    s = RedactingStream(buf)
    s.write(f"half {REGISTERED[:6]}")
    s.write(f"{REGISTERED[6:]} line\nnext ")
    assert buf.getvalue() == "half *** line\n"
    s.flush()
    assert buf.getvalue() == "half *** line\nnext "
