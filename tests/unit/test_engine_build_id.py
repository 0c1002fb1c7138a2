"""The speed cache tells engine builds apart (sidecar/models/speed.py,
``engine_build_id``): the same llama-cpp-python version built with other CPU features
(scripts/setup's AVX-512 build against the AVX2 baseline) is measured again. Against a
real package folder on ``sys.path``."""

from __future__ import annotations

import hashlib
import sys

from sidecar.models import speed


def _fake_engine(root, lib_bytes: bytes) -> None:
    pkg = root / "llama_cpp"
    (pkg / "lib").mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "lib" / "libggml-cpu.so").write_bytes(lib_bytes)


def test_the_build_id_follows_the_cpu_library(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    _fake_engine(tmp_path, b"avx2 build")
    first = speed.engine_build_id()
    assert first == hashlib.sha256(b"avx2 build").hexdigest()[:12]
    assert f"|build={first}" in speed.machine_key(2, 0)
    _fake_engine(tmp_path, b"avx512 build")
    second = speed.engine_build_id()
    assert second != first
    assert f"|build={second}" in speed.machine_key(2, 0)


def test_no_library_reads_none(tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "llama_cpp", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "llama_cpp").mkdir()
    (tmp_path / "llama_cpp" / "__init__.py").write_text("", encoding="utf-8")
    assert speed.engine_build_id() == "none"
