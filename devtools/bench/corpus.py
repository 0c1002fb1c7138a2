"""The real-code corpus of the benchmarks: published packages nobody on this team wrote.

``python -m devtools.bench corpus [--half tune|report|all] [--kinds K,...]`` fetches the
corpus (once; later runs read the cache), prints a table of its packages (registry,
version, language, half, files, lines, and how many holes of each kind the files can
give) and exits 0; 1 when a package cannot be fetched or fails its checksum, with one
line saying which and why; 2 on bad arguments.

What it is (docs/benchmarks.md, "The real-code corpus")
    ``fixtures/corpus/manifest.toml`` pins each package by registry (``pypi``: an sdist;
    ``npm``: the registry's tarball; ``debian``: the ``.orig`` source tarball from the
    Debian archive), version, download URL and the archive's SHA-256, and lists the
    source files the benchmarks use (paths inside the archive). Nothing of the packages
    is committed: each archive is downloaded once, checked against its SHA-256, and the
    listed files are extracted into the cache.

The two halves
    Every package belongs to one half: ``tune`` (tuning decisions are made here) or
    ``report`` (published figures come from here). The split is by package, so no file,
    author or project style is on both sides.

Cache
    ``$SIDECAR_BENCH_CORPUS_DIR``, else ``<user cache dir>/sidecar/bench-corpus``
    (platformdirs). ``archives/<sha256>-<name>`` holds the verified archives;
    ``files/<package>-<version>/<path>`` the extracted files, next to a stamp
    (``.sha256``) naming the archive they came from. A stamp that matches means no
    network at all; a cached archive whose bytes no longer match its pin is deleted and
    fetched again.

Errors: :class:`CorpusError` (a message of one line: the package, what failed and where).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFEST = ROOT / "fixtures" / "corpus" / "manifest.toml"
REGISTRIES = ("pypi", "npm", "debian")
HALVES = ("tune", "report")
#: A listed file larger than this is refused (bytes): the corpus is source code.
MAX_FILE_BYTES = 2_000_000
_EXT_LANGUAGE = {
    ".py": "python",
    ".js": "javascript",
    ".ts": "typescript",
    ".c": "c",
    ".h": "c",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".cpp": "cpp",
    ".cc": "cpp",
}


class CorpusError(Exception):
    """The corpus cannot be used: a bad manifest, a failed download, a checksum mismatch
    or a listed file missing from its archive. ``str()`` is one line."""


@dataclass(frozen=True)
class Package:
    """One pinned package of ``manifest.toml``. ``files`` are paths inside the archive."""

    name: str
    registry: str
    version: str
    license: str
    language: str
    half: str
    url: str
    sha256: str
    files: tuple[str, ...]

    @property
    def key(self) -> str:
        """``<name>-<version>`` with characters unsafe in a folder name replaced."""
        return "".join(c if c.isalnum() or c in "._-+" else "_" for c in f"{self.name}-{self.version}")


@dataclass(frozen=True)
class CorpusFile:
    """One extracted file: ``path`` on disk, the package it is from, and its language."""

    path: Path
    package: str
    half: str
    language: str


def load_manifest(path: Path = MANIFEST) -> list[Package]:
    """The packages of the manifest at ``path``, in its order. Raises :class:`CorpusError`
    on a missing or malformed manifest (unknown registry or half, a SHA-256 that is not 64
    hex digits, no files, a path that leaves the archive, a duplicate name)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CorpusError(f"corpus manifest {path}: {exc}") from None
    out: list[Package] = []
    for i, raw in enumerate(data.get("package", [])):
        where = f"corpus manifest {path}, package {i + 1} ({raw.get('name', '?')})"
        try:
            pkg = Package(
                name=str(raw["name"]),
                registry=str(raw["registry"]),
                version=str(raw["version"]),
                license=str(raw["license"]),
                language=str(raw["language"]),
                half=str(raw["half"]),
                url=str(raw["url"]),
                sha256=str(raw["sha256"]).lower(),
                files=tuple(str(f) for f in raw["files"]),
            )
        except KeyError as exc:
            raise CorpusError(f"{where}: missing field {exc.args[0]!r}") from None
        if pkg.registry not in REGISTRIES:
            raise CorpusError(f"{where}: registry must be one of {', '.join(REGISTRIES)}, got {pkg.registry!r}")
        if pkg.half not in HALVES:
            raise CorpusError(f"{where}: half must be one of {', '.join(HALVES)}, got {pkg.half!r}")
        if len(pkg.sha256) != 64 or any(c not in "0123456789abcdef" for c in pkg.sha256):
            raise CorpusError(f"{where}: sha256 must be 64 hex digits")
        if not pkg.files:
            raise CorpusError(f"{where}: no files listed")
        for f in pkg.files:
            if f.startswith("/") or ".." in Path(f).parts:
                raise CorpusError(f"{where}: file path {f!r} leaves the archive")
        if any(p.name == pkg.name for p in out):
            raise CorpusError(f"{where}: duplicate package name")
        out.append(pkg)
    if not out:
        raise CorpusError(f"corpus manifest {path}: no [[package]] entries")
    return out


def cache_dir() -> Path:
    """Where the corpus is cached (see the module doc)."""
    env = os.environ.get("SIDECAR_BENCH_CORPUS_DIR", "").strip()
    if env:
        return Path(env)
    import platformdirs

    return Path(platformdirs.user_cache_dir("sidecar")) / "bench-corpus"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_archive(pkg: Package, cache: Path, *, timeout_s: float = 120.0) -> Path:
    """The package's archive in ``cache/archives``, downloaded (HTTP GET of ``pkg.url``,
    redirects followed) and checked against ``pkg.sha256`` when it is not there yet.
    Raises :class:`CorpusError` on an HTTP or network error or a checksum mismatch; a
    mismatching download is deleted, never kept."""
    import httpx2 as httpx

    folder = cache / "archives"
    dest = folder / f"{pkg.sha256}-{Path(pkg.url).name}"
    if dest.is_file():
        if _sha256(dest) == pkg.sha256:
            return dest
        dest.unlink()  # changed on disk since: fetch it again
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CorpusError(f"{pkg.name}: cannot create the corpus cache {folder}: {exc.strerror or exc}") from None
    part = dest.with_name(dest.name + ".part")
    h = hashlib.sha256()
    try:
        with httpx.stream("GET", pkg.url, follow_redirects=True, timeout=timeout_s) as resp:
            if resp.status_code != 200:
                raise CorpusError(f"{pkg.name} {pkg.version}: GET {pkg.url} answered HTTP {resp.status_code}")
            with part.open("wb") as out:
                for chunk in resp.iter_bytes():
                    h.update(chunk)
                    out.write(chunk)
    except httpx.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise CorpusError(f"{pkg.name} {pkg.version}: GET {pkg.url} failed: {exc}") from None
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise CorpusError(f"{pkg.name} {pkg.version}: cannot write {part}: {exc.strerror or exc}") from None
    except CorpusError:
        part.unlink(missing_ok=True)
        raise
    got = h.hexdigest()
    if got != pkg.sha256:
        part.unlink(missing_ok=True)
        raise CorpusError(
            f"{pkg.name} {pkg.version}: {pkg.url} has SHA-256 {got}, the manifest pins {pkg.sha256}; refusing it"
        )
    part.replace(dest)
    return dest


def extract_files(pkg: Package, archive: Path, cache: Path) -> list[Path]:
    """Write the package's listed files from ``archive`` (a tar, compressed or not) under
    ``cache/files/<key>/`` and return their paths, in the manifest's order. Raises
    :class:`CorpusError` when a listed file is missing, not a regular file, larger than
    ``MAX_FILE_BYTES`` or not UTF-8 text."""
    root = cache / "files" / pkg.key
    wanted = set(pkg.files)
    got: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if member.name in wanted:
                    if not member.isfile():
                        raise CorpusError(f"{pkg.name}: {member.name} in {archive.name} is not a regular file")
                    if member.size > MAX_FILE_BYTES:
                        raise CorpusError(f"{pkg.name}: {member.name} is {member.size} bytes, over {MAX_FILE_BYTES}")
                    f = tar.extractfile(member)
                    assert f is not None
                    got[member.name] = f.read()
    except (tarfile.TarError, OSError) as exc:
        raise CorpusError(f"{pkg.name}: cannot read {archive}: {exc}") from None
    missing = [f for f in pkg.files if f not in got]
    if missing:
        raise CorpusError(f"{pkg.name} {pkg.version}: not in its archive: {', '.join(missing)}")
    paths = []
    for name in pkg.files:
        try:
            got[name].decode("utf-8")
        except UnicodeDecodeError:
            raise CorpusError(f"{pkg.name}: {name} is not UTF-8 text") from None
        dest = root / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(got[name])
        tmp.replace(dest)
        paths.append(dest)
    (root / ".sha256").write_text(pkg.sha256 + "\n", encoding="ascii")
    return paths


def package_files(pkg: Package, cache: Path) -> list[Path]:
    """The package's files on disk: from the cache when its stamp matches the pin and
    every file is there (no network), else fetched and extracted."""
    root = cache / "files" / pkg.key
    stamp = root / ".sha256"
    paths = [root / f for f in pkg.files]
    try:
        if stamp.read_text(encoding="ascii").strip() == pkg.sha256 and all(p.is_file() for p in paths):
            return paths
    except OSError:
        pass
    try:
        return extract_files(pkg, fetch_archive(pkg, cache), cache)
    except OSError as exc:
        raise CorpusError(f"{pkg.name}: cannot write the corpus cache {root}: {exc.strerror or exc}") from None


def corpus_files(half: str = "report", *, manifest: Path = MANIFEST, cache: Path | None = None) -> list[CorpusFile]:
    """Every file of the corpus half ``half`` (``tune``, ``report`` or ``all``), fetched
    as needed, in manifest order. Raises :class:`CorpusError` (see the module doc)."""
    if half not in (*HALVES, "all"):
        raise CorpusError(f"corpus half must be one of {', '.join(HALVES)}, all; got {half!r}")
    cache = cache or cache_dir()
    out: list[CorpusFile] = []
    for pkg in load_manifest(manifest):
        if half != "all" and pkg.half != half:
            continue
        for path in package_files(pkg, cache):
            out.append(
                CorpusFile(
                    path=path,
                    package=pkg.name,
                    half=pkg.half,
                    language=_EXT_LANGUAGE.get(path.suffix.lower(), pkg.language),
                )
            )
    return out


def package_of(path: Path | str, cache: Path | None = None) -> str | None:
    """The corpus package a file path belongs to (by its cache folder), or None."""
    parts = Path(path).parts
    if "files" in parts:
        i = len(parts) - 1 - parts[::-1].index("files")
        if i + 1 < len(parts):
            return parts[i + 1]
    return None


# -- whole source trees (the cross-file benchmark, devtools/bench/crossfile.py) -------------

#: The rules below, by name: a tree extracted under other rules is extracted again.
TREE_RULES = "tree-1"
#: The source extensions a tree keeps, by the package's language.
TREE_EXTENSIONS = {
    "python": (".py",),
    "javascript": (".js", ".mjs", ".cjs"),
    "typescript": (".ts", ".tsx", ".mts", ".cts"),
    "java": (".java",),
    "go": (".go",),
    "c": (".c", ".h"),
    "rust": (".rs",),
    "cpp": (".cpp", ".cc", ".h", ".hpp"),
}
#: Folders a tree leaves out anywhere in a path: tests, docs, examples, benchmarks,
#: vendored, built and generated code.
TREE_SKIP_DIRS = frozenset(
    {
        "test",
        "tests",
        "testing",
        "testdata",
        "__tests__",
        "spec",
        "specs",
        "fixtures",
        "doc",
        "docs",
        "example",
        "examples",
        "samples",
        "bench",
        "benches",
        "benchmark",
        "benchmarks",
        "perf",
        "vendor",
        "vendored",
        "third_party",
        "thirdparty",
        "node_modules",
        "dist",
        "build",
        "out",
        "target",
        "typings",
        "typing-examples",
        "scripts",
        "verify",
        "__pycache__",
    }
)
#: Files named like these are left out (tests, build scripts, declaration files, minified code).
TREE_SKIP_FILES = ("setup.py", "noxfile.py", "conftest.py", "fabfile.py", "package-info.java", "module-info.java")
TREE_SKIP_SUFFIXES = (
    "_test.py",
    "_test.go",
    ".test.js",
    ".test.ts",
    ".spec.js",
    ".spec.ts",
    "Test.java",
    "Tests.java",
    ".d.ts",
    ".min.js",
    ".pb.go",
    "_pb2.py",
)
#: Project files kept at a tree's top folder (what marks a project's root for a tool).
TREE_ROOT_FILES = frozenset(
    {"package.json", "tsconfig.json", "go.mod", "pyproject.toml", "setup.cfg", "pom.xml", "build.gradle", "Cargo.toml"}
)
#: A file with a line longer than this is minified or generated (characters).
TREE_MAX_LINE_CHARS = 2000


@dataclass(frozen=True)
class ProjectTree:
    """A package's whole source tree on disk: ``root`` is the project's folder (the
    archive's top folder under ``<cache>/projects/<key>/``), ``files`` its source files
    (absolute paths, sorted by path), ``language`` the package's language."""

    package: Package
    root: Path
    files: tuple[Path, ...]

    @property
    def language(self) -> str:
        return self.package.language


def tree_keeps(name: str, language: str) -> bool:
    """Whether the archive member ``name`` (a ``/``-separated path) is a source file of
    a ``language`` tree by its path alone: an extension of ``TREE_EXTENSIONS``, no folder
    of ``TREE_SKIP_DIRS`` (nor a hidden one), not a hidden, test, build, declaration or
    minified file name (so Java's ``src/test`` is left out)."""
    parts = [p for p in name.split("/") if p]
    if not parts:
        return False
    base = parts[-1]
    if base.startswith(".") or not base.endswith(TREE_EXTENSIONS.get(language, ())):
        return False
    if base in TREE_SKIP_FILES or base.endswith(TREE_SKIP_SUFFIXES) or base.startswith("test_"):
        return False
    dirs = parts[:-1]
    if any(d in TREE_SKIP_DIRS or d.startswith(".") or d.endswith(".egg-info") for d in dirs):
        return False
    return ".min." not in base


def looks_generated(text: str) -> bool:
    """A generated or minified file: a ``Code generated ... DO NOT EDIT`` or ``@generated``
    mark in its first 20 lines, or a line over ``TREE_MAX_LINE_CHARS`` characters."""
    head = text[:4000].split("\n", 20)[:20]
    if any(("Code generated" in ln and "DO NOT EDIT" in ln) or "@generated" in ln for ln in head):
        return True
    return any(len(ln) > TREE_MAX_LINE_CHARS for ln in text.split("\n"))


def _tree_stamp(pkg: Package) -> str:
    return f"{pkg.sha256} {TREE_RULES}"


def _tree_root(folder: Path, rels: list[str]) -> Path:
    """The project's folder: the one top folder every kept file shares, else ``folder``."""
    tops = {r.split("/", 1)[0] for r in rels if "/" in r}
    if len(tops) == 1 and all("/" in r for r in rels):
        return folder / tops.pop()
    return folder


def extract_tree(pkg: Package, archive: Path, cache: Path) -> ProjectTree:
    """Write the package's whole source tree from ``archive`` under
    ``cache/projects/<key>/`` (replacing what was there): every member
    :func:`tree_keeps` keeps that is UTF-8 text of at most ``MAX_FILE_BYTES`` and not
    :func:`looks_generated`, plus the project files of ``TREE_ROOT_FILES`` at the top
    folder; then the stamp (``.sha256``: the pin and ``TREE_RULES``) and the list of
    files (``.files``). Raises :class:`CorpusError` when the archive cannot be read or
    no source file is kept."""
    import shutil

    folder = cache / "projects" / pkg.key
    got: dict[str, bytes] = {}
    markers: dict[str, bytes] = {}
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                name = member.name
                if not member.isfile() or name.startswith("/") or ".." in Path(name).parts:
                    continue
                source = tree_keeps(name, pkg.language)
                marker = Path(name).name in TREE_ROOT_FILES and name.count("/") <= 1
                if not (source or marker) or member.size > MAX_FILE_BYTES:
                    continue
                f = tar.extractfile(member)
                if f is None:
                    continue
                data = f.read()
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:
                    continue
                if source and not looks_generated(text):
                    got[name] = data
                elif marker:
                    markers[name] = data
    except (tarfile.TarError, OSError) as exc:
        raise CorpusError(f"{pkg.name}: cannot read {archive}: {exc}") from None
    if not got:
        raise CorpusError(f"{pkg.name} {pkg.version}: no {pkg.language} source file in {archive.name}")
    rels = sorted(got)
    try:
        if folder.exists():
            shutil.rmtree(folder)
        for name, data in {**markers, **got}.items():
            dest = folder / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        (folder / ".files").write_text("".join(r + "\n" for r in rels), encoding="utf-8")
        (folder / ".sha256").write_text(_tree_stamp(pkg) + "\n", encoding="ascii")
    except OSError as exc:
        raise CorpusError(f"{pkg.name}: cannot write the corpus cache {folder}: {exc.strerror or exc}") from None
    return ProjectTree(pkg, _tree_root(folder, rels), tuple(folder / r for r in rels))


def package_tree(pkg: Package, cache: Path | None = None) -> ProjectTree:
    """The package's whole source tree on disk (:func:`extract_tree`): from the cache
    when its stamp matches the pin and the rules and every listed file is there (no
    network), else from the archive (fetched and checked as :func:`fetch_archive`
    does). Raises :class:`CorpusError`."""
    cache = cache or cache_dir()
    folder = cache / "projects" / pkg.key
    try:
        if (folder / ".sha256").read_text(encoding="ascii").strip() == _tree_stamp(pkg):
            rels = [r for r in (folder / ".files").read_text(encoding="utf-8").split("\n") if r]
            paths = [folder / r for r in rels]
            if rels and all(p.is_file() for p in paths):
                return ProjectTree(pkg, _tree_root(folder, rels), tuple(paths))
    except OSError:
        pass
    return extract_tree(pkg, fetch_archive(pkg, cache), cache)


def main(argv: list[str] | None = None) -> int:
    from .quality_holes import KINDS, _candidates

    p = argparse.ArgumentParser(
        prog="python -m devtools.bench corpus",
        description="Fetch the real-code corpus (cached) and list its packages and hole counts.",
    )
    p.add_argument("--half", default="all", choices=(*HALVES, "all"), help="which half (default all)")
    args = p.parse_args(argv)
    try:
        files = corpus_files(args.half)
        packages = {pkg.name: pkg for pkg in load_manifest()}
    except CorpusError as exc:
        print(f"python -m devtools.bench corpus: {exc}", file=sys.stderr)
        return 1
    rows = []
    totals: dict[str, dict[str, int]] = {}
    for name in dict.fromkeys(f.package for f in files):
        pkg = packages[name]
        mine = [f for f in files if f.package == name]
        lines = 0
        counts = dict.fromkeys(KINDS, 0)
        for f in mine:
            text = f.path.read_text(encoding="utf-8")
            lines += text.count("\n")
            for k in KINDS:
                counts[k] += len({ln for ln, _c in _candidates(k, text.split("\n"), f.language)})
        half_totals = totals.setdefault(pkg.half, dict.fromkeys(KINDS, 0))
        for k in KINDS:
            half_totals[k] += counts[k]
        rows.append(
            [
                pkg.half,
                pkg.name,
                pkg.registry,
                pkg.version,
                pkg.language,
                pkg.license,
                str(len(mine)),
                str(lines),
                *[str(counts[k]) for k in KINDS],
            ]
        )
    head = ["half", "package", "registry", "version", "language", "license", "files", "lines", *KINDS]
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    for half, t in totals.items():
        print(f"{half}: hole positions per kind (one per line and kind): " + ", ".join(f"{k} {t[k]}" for k in KINDS))
    print(f"cache: {cache_dir()}")
    return 0
