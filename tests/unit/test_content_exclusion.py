"""Content exclusion (sidecar/completion/crossfile/exclusion.py) on real files: which
rule covers a path, from a workspace folder's ``.sidecarignore``, the user's and the
``ignore_paths`` setting; invalid lines skipped and logged once; a changed file re-read."""

from __future__ import annotations

import logging
import os
import time

from sidecar.completion.crossfile import exclusion
from sidecar.completion.crossfile.exclusion import ContentExclusion, compile_rules


def test_rules_from_each_source_and_none_takes_back_another_s(tmp_path):
    ws = tmp_path / "ws"
    conf = tmp_path / "conf"
    ws.mkdir()
    conf.mkdir()
    (conf / ".sidecarignore").write_text("*.pem\n# a comment\n\nnotes.md\n")
    (ws / ".sidecarignore").write_text("secrets/\n/config/prod.py\n!public.pem\n")
    ex = ContentExclusion(conf, ["private_*.py"])
    ex.set_folders([str(ws)])
    assert ex.excluded(str(ws / "secrets" / "keys.py")) == f"{ws / '.sidecarignore'}:1: secrets/"
    assert ex.excluded(str(ws / "a" / "secrets" / "k.py")) is not None  # unanchored folder pattern
    assert ex.excluded(str(ws / "config" / "prod.py")) is not None
    assert ex.excluded(str(ws / "sub" / "config" / "prod.py")) is None  # anchored at the folder
    assert ex.excluded(str(ws / "server.pem")) == f"{conf / '.sidecarignore'}:1: *.pem"
    # The folder's ! cannot take back what the user's rules exclude (a repository's file
    # must not switch them off) ...
    assert ex.excluded(str(ws / "public.pem")) == f"{conf / '.sidecarignore'}:1: *.pem"
    assert ex.excluded(str(ws / "pkg" / "private_keys.py")) == "setting ignore_paths:1: private_*.py"
    assert ex.excluded(str(ws / "pkg" / "main.py")) is None
    # Outside every folder: the user's rules and the setting still hold, unanchored.
    assert ex.excluded("/elsewhere/id.pem") is not None
    assert ex.excluded("/elsewhere/app.py") is None
    assert len(ex.describe()) == 3


def test_an_invalid_line_is_skipped_and_logged_once(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=exclusion.__name__)
    lines = ["ok.py", "bad\\", "also_ok/"]
    rules = compile_rules(str(tmp_path / ".sidecarignore"), lines)
    again = compile_rules(str(tmp_path / ".sidecarignore"), lines)
    assert rules.patterns == again.patterns == ("ok.py", "also_ok/")
    assert rules.lines == (1, 3)
    warnings = [r.getMessage() for r in caplog.records if "not a valid pattern" in r.getMessage()]
    assert len(warnings) == 1 and "line 2" in warnings[0], warnings


def test_a_changed_folder_file_is_read_again(tmp_path, monkeypatch):
    monkeypatch.setattr(exclusion, "RECHECK_S", 0.0)
    (tmp_path / ".sidecarignore").write_text("a.py\n")
    ex = ContentExclusion(None)
    ex.set_folders([str(tmp_path)])
    assert ex.excluded(str(tmp_path / "a.py"))
    assert not ex.excluded(str(tmp_path / "b.py"))
    (tmp_path / ".sidecarignore").write_text("b.py\n")
    st = os.stat(tmp_path / ".sidecarignore")
    os.utime(tmp_path / ".sidecarignore", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    time.sleep(0.01)
    assert not ex.excluded(str(tmp_path / "a.py"))
    assert ex.excluded(str(tmp_path / "b.py"))


def test_no_rules_and_unreadable_files_exclude_nothing(tmp_path):
    ex = ContentExclusion(tmp_path / "missing")
    ex.set_folders([str(tmp_path / "nowhere")])
    assert ex.excluded(str(tmp_path / "nowhere" / "x.py")) is None
    assert ex.excluded("") is None
    assert ex.describe() == []


def test_negation_works_within_one_file(tmp_path):
    (tmp_path / ".sidecarignore").write_text("secrets/*\n!secrets/public.py\n")
    ex = ContentExclusion(None)
    ex.set_folders([str(tmp_path)])
    assert ex.excluded(str(tmp_path / "secrets" / "keys.py"))
    assert ex.excluded(str(tmp_path / "secrets" / "public.py")) is None


def test_links_and_nested_folders_do_not_get_round_the_rules(tmp_path):
    real = tmp_path / "real"
    (real / "secrets").mkdir(parents=True)
    (real / "pkg").mkdir()
    (real / ".sidecarignore").write_text("secrets/\npkg/vault.py\n")
    (real / "secrets" / "vault.py").write_text("x = 1\n")
    (real / "pkg" / "alias.py").symlink_to(real / "secrets" / "vault.py")
    (tmp_path / "link").symlink_to(real)
    # The folder opened by its link, the file named by its real path, and the reverse.
    ex = ContentExclusion(None)
    ex.set_folders([str(tmp_path / "link")])
    assert ex.excluded(str(real / "pkg" / "vault.py"))
    ex.set_folders([str(real)])
    assert ex.excluded(str(tmp_path / "link" / "pkg" / "vault.py"))
    # A file linked to an excluded one, under a name no rule covers.
    assert ex.excluded(str(real / "pkg" / "alias.py"))
    # Nested workspace folders: the outer folder's rules hold inside the inner one.
    (real / "sub" / "pkg").mkdir(parents=True)
    (real / ".sidecarignore").write_text("vault.py\n")
    ex2 = ContentExclusion(None)
    ex2.set_folders([str(real), str(real / "sub")])
    assert ex2.excluded(str(real / "sub" / "pkg" / "vault.py"))


def test_encodings_binary_and_size(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger=exclusion.__name__)
    f = tmp_path / ".sidecarignore"
    f.write_bytes("\ufeffvault.py\n".encode())  # Notepad's UTF-8 with a byte-order mark
    assert exclusion.read_rules(f).patterns == ("vault.py",)
    f.write_bytes("secrets/\r\n".encode("utf-16"))  # PowerShell 5's echo
    assert exclusion.read_rules(f).patterns == ("secrets/",)
    f.write_bytes(b"a.py\n\x00\x01\x02junk\n")
    binary = exclusion.read_rules(f)
    assert binary.patterns == () and "not a text file" in binary.problem
    monkeypatch.setattr(exclusion, "MAX_IGNORE_BYTES", 16)
    f.write_bytes(b"one.py\ntwo.py\nthree.py\n")
    big = exclusion.read_rules(f)
    assert big.patterns == ("one.py", "two.py") and "first" in big.problem  # no line cut in two
    assert any("not a text file" in r.getMessage() for r in caplog.records)
    assert any("the rest is ignored" in r.getMessage() for r in caplog.records)


def test_a_pattern_that_would_take_seconds_to_match_is_refused():
    rules = compile_rules("x", ["*a*a*a*a*b", "**/build/**/*.py", "*_*_*.py"])
    assert rules.patterns == ("**/build/**/*.py", "*_*_*.py") and rules.skipped == (1,)
    start = time.perf_counter()
    assert rules.check("a" * 200 + ".py") is None
    assert time.perf_counter() - start < 1.0


def test_describe_names_skipped_lines_and_prints_no_control_characters(tmp_path):
    (tmp_path / ".sidecarignore").write_text("ok.py\nbroken\\\n\x1b[31mred.py\n")
    ex = ContentExclusion(None)
    ex.set_folders([str(tmp_path)])
    (line,) = ex.describe()
    assert "2 rules" in line and "1 invalid line skipped (2)" in line, line
    assert "\x1b" not in line and "?[31mred.py" in line, line


def test_the_user_file_is_read_again_when_it_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(exclusion, "RECHECK_S", 0.0)
    ex = ContentExclusion(tmp_path)
    assert ex.excluded("/w/vault.py") is None
    (tmp_path / ".sidecarignore").write_text("vault.py\n")
    assert ex.excluded("/w/vault.py")
