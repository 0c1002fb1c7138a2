"""The real-code corpus (devtools/bench/corpus.py): the shipped manifest's shape, and
fetching over real HTTP on loopback (checksum, cache, refusals)."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from devtools.bench import corpus
from devtools.bench.quality_holes import KINDS, _candidates


def test_shipped_manifest_is_two_disjoint_halves_of_the_same_languages():
    pkgs = corpus.load_manifest()
    assert len(pkgs) >= 12
    langs = {p.language for p in pkgs}
    assert len(langs) >= 6
    by_half = {h: [p for p in pkgs if p.half == h] for h in corpus.HALVES}
    assert {p.language for p in by_half["tune"]} == {p.language for p in by_half["report"]} == langs
    assert not {p.name for p in by_half["tune"]} & {p.name for p in by_half["report"]}
    assert {p.registry for p in pkgs} == set(corpus.REGISTRIES)
    assert all(p.license for p in pkgs)


def _archive(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def server():
    """A real HTTP server on loopback serving ``routes`` (path -> bytes), counting GETs."""
    routes: dict[str, bytes] = {}
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", routes, hits
    httpd.shutdown()
    httpd.server_close()


CODE = "def f(x):\n    y = x + 1\n    return y\n\n\ndef g(a, b):\n    total = f(a) + f(b)\n    return total\n"


def _manifest(tmp: Path, url: str, sha: str, files: list[str], half: str = "report") -> Path:
    m = tmp / "manifest.toml"
    m.write_text(
        f'''[[package]]
name = "demo"
registry = "pypi"
version = "1.0"
license = "MIT"
language = "python"
half = "{half}"
url = "{url}"
sha256 = "{sha}"
files = {files!r}
'''.replace("'", '"')
    )
    return m


def test_fetch_checks_the_pin_extracts_and_then_needs_no_network(tmp_path, server):
    base, routes, hits = server
    data = _archive({"demo-1.0/src/mod.py": CODE, "demo-1.0/README": "x"})
    routes["/demo-1.0.tar.gz"] = data
    m = _manifest(tmp_path, f"{base}/demo-1.0.tar.gz", hashlib.sha256(data).hexdigest(), ["demo-1.0/src/mod.py"])
    cache = tmp_path / "cache"
    files = corpus.corpus_files("report", manifest=m, cache=cache)
    assert [f.path.read_text() for f in files] == [CODE]
    assert files[0].language == "python" and files[0].package == "demo"
    assert len(hits) == 1
    assert not list((cache / "archives").glob("*.part"))
    # the holes the benchmarks cut come from the extracted file
    assert all(_candidates(k, CODE.split("\n"), "python") for k in KINDS if k != "mid_line")
    routes.clear()  # the registry is gone: the cache answers
    again = corpus.corpus_files("all", manifest=m, cache=cache)
    assert [f.path for f in again] == [f.path for f in files] and len(hits) == 1
    assert corpus.corpus_files("tune", manifest=m, cache=cache) == []


def test_a_download_that_does_not_match_its_pin_is_refused_and_not_kept(tmp_path, server):
    base, routes, hits = server
    routes["/demo-1.0.tar.gz"] = _archive({"demo-1.0/src/mod.py": CODE})
    m = _manifest(tmp_path, f"{base}/demo-1.0.tar.gz", "0" * 64, ["demo-1.0/src/mod.py"])
    with pytest.raises(corpus.CorpusError, match="SHA-256 .* the manifest pins 0000"):
        corpus.corpus_files("report", manifest=m, cache=tmp_path / "cache")
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


def test_http_errors_and_missing_files_are_one_line_errors(tmp_path, server):
    base, routes, _hits = server
    m = _manifest(tmp_path, f"{base}/gone.tar.gz", "0" * 64, ["demo-1.0/src/mod.py"])
    with pytest.raises(corpus.CorpusError, match="HTTP 404") as exc:
        corpus.corpus_files("report", manifest=m, cache=tmp_path / "c1")
    assert "\n" not in str(exc.value)
    data = _archive({"demo-1.0/src/mod.py": CODE})
    routes["/demo-1.0.tar.gz"] = data
    m = _manifest(tmp_path, f"{base}/demo-1.0.tar.gz", hashlib.sha256(data).hexdigest(), ["demo-1.0/src/other.py"])
    with pytest.raises(corpus.CorpusError, match="not in its archive: demo-1.0/src/other.py"):
        corpus.corpus_files("report", manifest=m, cache=tmp_path / "c2")


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("registry", "cargo", "registry must be one of"),
        ("half", "both", "half must be one of"),
        ("sha256", "abc", "64 hex digits"),
    ],
)
def test_a_malformed_manifest_is_refused(tmp_path, field, value, message):
    m = _manifest(tmp_path, "http://127.0.0.1:1/x.tar.gz", "0" * 64, ["a/b.py"])
    text = m.read_text()
    old = {"registry": 'registry = "pypi"', "half": 'half = "report"', "sha256": f'sha256 = "{"0" * 64}"'}[field]
    m.write_text(text.replace(old, f'{field} = "{value}"'))
    with pytest.raises(corpus.CorpusError, match=message):
        corpus.load_manifest(m)


def test_a_path_that_leaves_the_archive_is_refused(tmp_path):
    m = _manifest(tmp_path, "http://127.0.0.1:1/x.tar.gz", "0" * 64, ["../etc/passwd"])
    with pytest.raises(corpus.CorpusError, match="leaves the archive"):
        corpus.load_manifest(m)
