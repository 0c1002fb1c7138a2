"""Which GGUF the managed engine loads (sidecar/models/select.py), against a real models
folder: installed files are real (sparse) files of the catalog's size with their
``.verified`` marker, as ``sidecar model pull`` leaves them."""

from __future__ import annotations

import os

import pytest

from sidecar.models import catalog, hardware, select, store


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setenv(store.MODELS_DIR_ENV, str(folder))
    # A CPU machine with plenty of RAM unless a test says otherwise.
    monkeypatch.setattr(hardware, "usable_gpu_mb", lambda: None)
    monkeypatch.setattr(hardware, "available_ram_mb", lambda: 16000)
    return folder


def install(name: str) -> None:
    """Lay out an installed model as a pull does: the file at its size and the marker."""
    entry = catalog.get(name)
    path = store.model_path(entry)
    with open(path, "wb") as f:
        f.truncate(entry.size)  # sparse: the size is what installed_path checks
    path.with_name(path.name + ".verified").write_text(entry.sha256 + "\n", encoding="ascii")


def test_auto_without_a_code_model_is_the_shipped_one_and_says_how_to_get_one(models_dir):
    choice = select.choose(None, None)
    assert choice.path is None and choice.name == "smollm2-135m" and choice.fim is False
    assert "sidecar model pull qwen2.5-coder-0.5b" in choice.note and choice.error is None


def test_auto_on_a_cpu_takes_the_small_code_model(models_dir):
    install("qwen2.5-coder-0.5b")
    install("qwen2.5-coder-1.5b")
    choice = select.choose("auto", None)
    assert choice.name == "qwen2.5-coder-0.5b" and choice.fim is True and choice.note is None
    assert choice.path == store.model_path(catalog.get("qwen2.5-coder-0.5b"))


def test_auto_with_a_gpu_takes_the_largest_that_fits(models_dir, monkeypatch):
    install("qwen2.5-coder-0.5b")
    install("qwen2.5-coder-1.5b")
    monkeypatch.setattr(hardware, "usable_gpu_mb", lambda: 24000)
    assert select.choose("auto", None).name == "qwen2.5-coder-1.5b"
    monkeypatch.setattr(hardware, "usable_gpu_mb", lambda: 1000)  # only the 0.5B fits
    assert select.choose("auto", None).name == "qwen2.5-coder-0.5b"


def test_auto_falls_back_when_memory_is_short_and_says_so(models_dir, monkeypatch):
    install("qwen2.5-coder-0.5b")
    monkeypatch.setattr(hardware, "available_ram_mb", lambda: 300)
    choice = select.choose("auto", None)
    assert choice.path is None and "300 MiB are free" in choice.note


def test_a_named_model_that_is_not_installed_is_an_error_naming_the_command(models_dir):
    choice = select.choose("qwen2.5-coder-1.5b", None)
    assert choice.error and "sidecar model pull qwen2.5-coder-1.5b" in choice.error


def test_an_unknown_name_lists_the_known_ones(models_dir):
    choice = select.choose("gpt-17", None)
    assert choice.error and "qwen2.5-coder-0.5b" in choice.error and "local_model_path" in choice.error


def test_a_path_wins_over_the_name(models_dir, tmp_path):
    choice = select.choose("qwen2.5-coder-1.5b", str(tmp_path / "mine.gguf"))
    assert choice.path == tmp_path / "mine.gguf" and choice.error is None


def test_a_file_without_its_marker_or_of_the_wrong_size_is_not_installed(models_dir):
    entry = catalog.get("qwen2.5-coder-0.5b")
    path = store.model_path(entry)
    with open(path, "wb") as f:
        f.truncate(entry.size)
    assert store.installed_path(entry) is None  # no marker: a pull that did not finish
    path.with_name(path.name + ".verified").write_text(entry.sha256 + "\n", encoding="ascii")
    assert store.installed_path(entry) == path
    os.truncate(path, entry.size - 1)
    assert store.installed_path(entry) is None
