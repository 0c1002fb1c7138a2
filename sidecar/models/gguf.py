"""Read the metadata of a GGUF file without loading it (the GGUF spec, ggml
``docs/gguf.md``).

Layout (little-endian): magic ``b"GGUF"``, uint32 version (2 or 3), uint64 tensor_count,
uint64 metadata_kv_count, then the key/value pairs. A string is a uint64 byte length and
UTF-8 bytes; a value is a uint32 type (0..12: uint8, int8, uint16, int16, uint32, int32,
float32, bool, string, array, uint64, int64, float64) and its bytes; an array is a uint32
element type, a uint64 count and the elements.

The reader streams through a buffered file: numeric arrays are skipped by seeking, and
the token list (``tokenizer.ggml.tokens``, ~152k strings for Qwen) is scanned for the FIM
tokens only, so memory stays small whatever the file size. Every length is bounded and
checked against the file size: a corrupt or truncated file raises :class:`GgufError`
quickly instead of allocating gigabytes or looping.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"GGUF"
MAX_STRING = 16 * 1024 * 1024  # bytes
MAX_KV = 1_000_000
MAX_ARRAY = 100_000_000

#: Fill-in-the-middle tokens looked for in the token list: Qwen2.5-Coder's, then StarCoder's.
QWEN_FIM = ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")
STARCODER_FIM = ("<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>")
FIM_TOKENS = frozenset(QWEN_FIM + STARCODER_FIM)
_FIM_TRIPLES = (frozenset(QWEN_FIM[:3]), frozenset(STARCODER_FIM[:3]))
_FIM_BYTES = {t.encode(): t for t in FIM_TOKENS}
_FIM_LENGTHS = frozenset(len(b) for b in _FIM_BYTES)

_STRING, _ARRAY = 8, 9
#: Fixed sizes of the numeric value types (bytes) and their struct formats.
_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_FORMATS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class GgufError(ValueError):
    """A file that is not a usable GGUF; the message names the file, the cause and the fix."""


@dataclass(frozen=True)
class GgufInfo:
    """What :func:`read_header` found: the format ``version``, ``general.architecture``
    and ``general.name`` (None when absent), the number of tokens in
    ``tokenizer.ggml.tokens`` (0 when absent) and which of :data:`FIM_TOKENS` it holds."""

    version: int
    architecture: str | None
    token_count: int
    fim_tokens: frozenset[str]
    name: str | None

    @property
    def has_fim(self) -> bool:
        """True when the prefix, suffix and middle tokens of one FIM family are all present."""
        return any(triple <= self.fim_tokens for triple in _FIM_TRIPLES)


class _Reader:
    """Bounded little-endian reads from a buffered file; every read is checked against
    the file size first, so a bad length fails before anything is allocated."""

    def __init__(self, f, size: int, path: Path) -> None:
        self.f, self.size, self.path, self.pos = f, size, path, 0

    def fail(self, why: str) -> GgufError:
        return GgufError(
            f"{self.path}: not a usable GGUF model file ({why} at byte {self.pos}); "
            "the file is damaged or not a GGUF: delete it and download it again"
        )

    def need(self, n: int) -> None:
        if n > self.size - self.pos:
            raise self.fail(f"truncated: {n} more bytes needed, {self.size - self.pos} left")

    def read(self, n: int) -> bytes:
        self.need(n)
        data = self.f.read(n)
        if len(data) != n:
            raise self.fail("truncated while reading")
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        self.need(n)
        self.f.seek(n, os.SEEK_CUR)
        self.pos += n

    def scalar(self, vtype: int):
        return struct.unpack(_FORMATS[vtype], self.read(_SIZES[vtype]))[0]

    def u32(self) -> int:
        return self.scalar(4)

    def u64(self) -> int:
        return self.scalar(10)

    def str_len(self) -> int:
        n = self.u64()
        if n > MAX_STRING:
            raise self.fail(f"a string of {n} bytes (more than {MAX_STRING})")
        return n

    def string(self) -> str:
        return self.read(self.str_len()).decode("utf-8", errors="replace")

    def value_type(self) -> int:
        t = self.u32()
        if t not in _SIZES and t not in (_STRING, _ARRAY):
            raise self.fail(f"unknown value type {t}")
        return t


def _skip_value(r: _Reader, vtype: int, depth: int = 0) -> None:
    if vtype in _SIZES:
        r.skip(_SIZES[vtype])
    elif vtype == _STRING:
        r.skip(r.str_len())
    else:
        if depth >= 2:
            raise r.fail("arrays nested too deeply")
        etype, count = r.value_type(), r.u64()
        if count > MAX_ARRAY:
            raise r.fail(f"an array of {count} elements (more than {MAX_ARRAY})")
        if etype in _SIZES:
            r.skip(count * _SIZES[etype])
        else:
            for _ in range(count):  # each element moves at least 8 bytes on: bounded by the file size
                _skip_value(r, etype, depth + 1)


def _scan_tokens(r: _Reader) -> tuple[int, frozenset[str]]:
    """Read the token array after its key: (number of tokens, FIM tokens present)."""
    etype, count = r.value_type(), r.u64()
    if etype != _STRING:
        raise r.fail(f"tokenizer.ggml.tokens has element type {etype}, not string")
    if count > MAX_ARRAY:
        raise r.fail(f"a token list of {count} elements (more than {MAX_ARRAY})")
    found = set()
    for _ in range(count):
        n = r.str_len()
        if n in _FIM_LENGTHS:
            token = _FIM_BYTES.get(r.read(n))
            if token is not None:
                found.add(token)
        else:
            r.skip(n)
    return count, frozenset(found)


def read_header(path: str | os.PathLike) -> GgufInfo:
    """Parse the GGUF header and metadata of ``path`` (tensor data is never read).

    Raises GgufError for a file that is not GGUF v2/v3 or whose metadata is truncated or
    out of bounds (strings over 16 MiB, over 10^6 keys, arrays over 10^8 elements), and
    OSError when the file cannot be opened.
    """
    path = Path(path)
    with open(path, "rb", buffering=1 << 16) as f:
        r = _Reader(f, os.fstat(f.fileno()).st_size, path)
        if r.size < 4 or r.read(4) != MAGIC:
            raise GgufError(
                f"{path}: not a GGUF model file (it does not start with b'GGUF'); "
                "check the path, or delete the file and download it again"
            )
        version = r.u32()
        if version not in (2, 3):
            why = "big-endian GGUF" if version in (0x02000000, 0x03000000) else f"GGUF version {version}"
            raise GgufError(
                f"{path}: {why} is not supported (only little-endian versions 2 and 3); "
                "use a GGUF converted by a current llama.cpp"
            )
        r.u64()  # tensor_count
        kv_count = r.u64()
        if kv_count > MAX_KV:
            raise r.fail(f"{kv_count} metadata keys (more than {MAX_KV})")
        arch = name = None
        token_count = 0
        fim: frozenset[str] = frozenset()
        for _ in range(kv_count):
            key = r.string()
            vtype = r.value_type()
            if key in ("general.architecture", "general.name") and vtype == _STRING:
                if key == "general.architecture":
                    arch = r.string()
                else:
                    name = r.string()
            elif key == "tokenizer.ggml.tokens" and vtype == _ARRAY:
                token_count, fim = _scan_tokens(r)
            else:
                _skip_value(r, vtype)
    return GgufInfo(version, arch, token_count, fim, name)


def check_gguf(path: str | os.PathLike, expect_arch: str | None = None, need_fim: bool = False) -> GgufInfo:
    """:func:`read_header`, then check the architecture (when ``expect_arch``) and the FIM
    tokens (when ``need_fim``). Raises GgufError naming the file, the cause and the fix
    (an unreadable file too)."""
    path = Path(path)
    try:
        info = read_header(path)
    except OSError as exc:
        raise GgufError(
            f"{path}: cannot read the model file ({exc.strerror or exc}); check the path and its permissions"
        ) from None
    if expect_arch is not None and info.architecture != expect_arch:
        raise GgufError(
            f"{path}: the GGUF architecture is {info.architecture!r}, expected {expect_arch!r}: "
            "it is another model than its name says; delete it and download the right file"
        )
    if need_fim and not info.has_fim:
        missing = sorted(set(QWEN_FIM[:3]) - info.fim_tokens)
        raise GgufError(
            f"{path}: the tokenizer lacks the fill-in-the-middle tokens {', '.join(missing)}; "
            'use a code model with FIM (e.g. `sidecar model pull qwen2.5-coder-0.5b`) or set fim = "chat"'
        )
    return info
