"""The redaction of other files' snippets before a cloud prompt (observability/redact.py,
``redact_code``): credential shapes found in real code are masked, ordinary code is left
as written (a mangled snippet misleads the model)."""

from __future__ import annotations

import pytest

from sidecar.completion.crossfile.exclusion import ContentExclusion
from sidecar.completion.crossfile.select import CrossFileContext
from sidecar.observability.redact import MASK, redact_code

SECRET_LINES = [
    'access_key = "AKIAQX7EXAMPLE7Z3KQ2"',
    'secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz91Ka2"',
    'STRIPE = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"',
    "STRIPE_KEY=sk_live_4eC39HqLyjWDarjtT1zdp7dc",
    "export DB_PASSWORD=hunter2blue",
    'cache = "redis://:pa55word@cache:6379/0"',
    'jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.abcdefghijk"',
    'conn = "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=abcd1234efgh5678==;EndpointSuffix=core"',
    'sas = "https://x.blob.core.windows.net/c?sv=2020&sig=abcDEF123%3D&se=2030"',
    'aws_tmp = "ASIAQX7EXAMPLE7Z3KQ2"',
    'gl = "glpat-abcdefghij0123456789"',
    'sg = "SG.abcdefghijklmnop1234.qrstuvwxyz0123456789abcd"',
    'hook = "https://hooks.slack.com/services/T000/B000/XXXXXXXX"',
    'auth = "Basic dXNlcjpwYXNzd29yZDEyMw=="',
    'cmd = "curl -u admin:S3cret https://x"',
    'api = os.environ.get("API_KEY", "fallback-key-123456")',
    'user.setPassword("Tr0ub4dor&3")',
    'pwd = "letmein99"',
    'cfg = {"pass": \'Sup3rS3cret!\', "private_key_id": "a1b2c3d4e5f6"}',
]

CODE_LINES = [
    'headers = {"Authorization": f"Bearer {token}"}',
    'headers = {"Authorization": "Bearer " + token}',
    "secret = hashlib.sha256(x).hexdigest()",
    "let token = Token::new(kind, span);",
    "credentials = service_account.Credentials.from_service_account_file(path)",
    "tokens = tokenize_sentence_into_words_v2(line)",
    "access_token=access_token_v2",
    "self.token = token_v2",
    'sort_key = "name"',
    "password = None",
    'token_type = "bearer"',
    'key = "user_id"',
    'api_key = os.environ["API_KEY"]',
    'password = getpass.getpass("Password: ")',
]

SECRET_LINES += [
    "const apiKey = `Hx9kQ2mZ7vLp4RtY8wNc`;",
    "define('DB_PASSWORD', 'hunter2pass');",
    'os.environ["API_KEY"] = "Hx9kQ2mZ7vLp4RtY8wNc"',
    'r = requests.get(url, auth=("admin", "hunter2pass"))',
    'auth = HTTPBasicAuth("admin", "hunter2pass")',
    'conn = psycopg2.connect("dbname=app user=app password=hunter2pass host=db")',
    "docker login --username me --password hunter2pass registry.example.com",
    "spring.datasource.password=hunter2pass",
    "<password>hunter2pass</password>",
    "      - POSTGRES_PASSWORD=hunter2pass",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz91Ka2",
    'url = "jdbc:postgresql://db/app?user=app&password=hunter2pass"',
    'url = "https://api.example.com/v1/data?api_key=Hx9kQ2mZ7vLp4RtY8wNc&q=1"',
    'props.put("mail.smtp.password", "hunter2pass");',
    'Map.of("username", "admin", "password", "hunter2pass")',
    'var password = @"hunter2pass";',
    'const cfg = { token: "a1b2c3d4e5f" }',
    "const cfg = { pass: 'Tr0ub4dor&3' }",
    'WH = "whsec_AbCdEfGhIjKlMnOpQrStUv0123456789"',
    'bot = telegram.Bot("123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw")',
    'passphrase = "correct horse battery staple"',
]

CODE_LINES += [
    'TOKEN_URL = "https://oauth2.googleapis.com/token"',
    'password_reset_url = "/accounts/password/reset/"',
    'password_field = "password"',
    'api_key_header = "X-API-Key"',
    'api_key_env = "OPENAI_API_KEY"',
    'secret_name = "prod/db/credentials"',
    'resp = client.get_secret_value(SecretId="prod/db/password")',
    'SECRET_KEY_ALGORITHM = "HmacSHA256"',
    'password_label = "Enter your password"',
    'errors = {"password": "This field is required."}',
    'throw new BadCredentialsException("Invalid username or password");',
    'key = "model.layers.0.self_attn.q_proj.weight"',
    's3.get_object(Bucket=b, Key="data/2023/01/file.parquet")',
    'passport_number = "X1234567"',
    'params = {"grant_type": "password", "username": u, "password": p}',
    'password := r.FormValue("password")',
    "connect(password=pw)",
]


@pytest.mark.parametrize("line", SECRET_LINES)
def test_a_credential_in_code_is_masked(line):
    out = redact_code(line)
    assert out != line and MASK in out, out


@pytest.mark.parametrize("line", CODE_LINES)
def test_ordinary_code_is_left_as_written(line):
    assert redact_code(line) == line


def test_a_long_line_costs_linear_time():
    """Each pattern starts only where a name starts and never backtracks into it: long
    runs of identifier characters, dots or separators take milliseconds, not seconds."""
    import time

    for text in ("a_" * 5000 + "=x", "password_token_key" * 600, "a." * 5000, "x://" + "a@" * 5000):
        start = time.perf_counter()
        redact_code(text)
        assert time.perf_counter() - start < 1.0, text[:40]


def test_a_private_key_block_cut_short_is_masked_to_the_end():
    text = 'KEY = """-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBx7\nAwEHoUQDQgAE'
    assert redact_code(text) == 'KEY = """-----BEGIN EC PRIVATE KEY-----***-----END EC PRIVATE KEY-----'


@pytest.mark.parametrize(
    "uri",
    ["file:///w/pkg/vault.py", "file:/w/pkg/vault.py", "vscode-notebook-cell:/w/pkg/vault.py#W0sZmlsZQ%3D%3D"],
)
def test_an_excluded_file_is_known_by_any_uri_form(tmp_path, uri):
    ex = ContentExclusion(None, ["vault.py"])
    cf = CrossFileContext(lambda: {}, excluded=ex.excluded)
    assert cf.excluded(uri)
    assert cf.excluded(uri.replace("vault", "main")) is None
