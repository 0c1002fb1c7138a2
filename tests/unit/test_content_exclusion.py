"""Content exclusion (sidecar/completion/crossfile/exclusion.py) on real files: which
rule covers a path, from a workspace folder's ``.sidecarignore``, the user's and the
``ignore_paths`` setting; invalid lines skipped and logged once; a changed file re-read."""

from __future__ import annotations

import logging
import os
import time

from sidecar.completion.crossfile import exclusion
from sidecar.completion.crossfile.exclusion import ContentExclusion, compile_rules


def test_rules_from_each_source_and_the_folder_decides_last(tmp_path):
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
    assert ex.excluded(str(ws / "public.pem")) is None  # the folder's ! takes it back
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
