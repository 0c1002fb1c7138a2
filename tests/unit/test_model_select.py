"""Which GGUF the managed engine loads (sidecar/models/select.py), against a real models
folder: installed files are real (sparse) files of the catalog's size with their
``.verified`` marker, as ``sidecar model pull`` leaves them."""

from __future__ import annotations

import os

import pytest

from sidecar.models import catalog, hardware, select, speed, store


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    folder = tmp_path / "models"
    folder.mkdir()
    monkeypatch.setenv(store.MODELS_DIR_ENV, str(folder))
    monkeypatch.setattr(speed, "cache_path", lambda: tmp_path / "model-speed.json")
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
    assert choice.name == "qwen2.5-coder-0.5b" and choice.fim is True
    assert "not measured on this machine yet" in choice.note and "sidecar model bench" in choice.note
    assert choice.path == store.model_path(catalog.get("qwen2.5-coder-0.5b"))


def _measured(name: str, first_line_ms: float, others_cpus: float = 0.0) -> None:
    """Cache figures for an installed model as a measurement on this machine would."""
    threads, layers = select.speed_settings(hardware.usable_gpu_mb() is not None)
    speed.store(
        store.model_path(catalog.get(name)),
        speed.Speed(
            prefill_tps=100.0,
            decode_tps=30.0,
            first_line_ms=first_line_ms,
            load_s=1.0,
            n_gpu_layers=layers,
            threads=threads,
            others_cpus=others_cpus,
        ),
    )


def test_auto_picks_by_measured_speed(models_dir):
    install("qwen2.5-coder-0.5b")
    install("qwen2.5-coder-1.5b")
    _measured("qwen2.5-coder-0.5b", 400.0)
    _measured("qwen2.5-coder-1.5b", 900.0)  # within the budget on this (fast) CPU: the larger one
    choice = select.choose("auto", None)
    assert choice.name == "qwen2.5-coder-1.5b" and choice.note is None
    _measured("qwen2.5-coder-1.5b", 2500.0)  # too slow to type with: the 0.5B
    assert select.choose("auto", None).name == "qwen2.5-coder-0.5b"
    _measured("qwen2.5-coder-0.5b", 1800.0)  # none fits: the fastest, and a note saying so
    choice = select.choose("auto", None)
    assert choice.name == "qwen2.5-coder-0.5b" and "about 1800 ms" in choice.note


def test_a_larger_model_measured_under_load_is_named_in_the_note(models_dir):
    install("qwen2.5-coder-0.5b")
    install("qwen2.5-coder-1.5b")
    _measured("qwen2.5-coder-0.5b", 400.0)
    _measured("qwen2.5-coder-1.5b", 4000.0, others_cpus=1.1)  # a compile ran beside it
    choice = select.choose("auto", None)
    assert choice.name == "qwen2.5-coder-0.5b"
    assert "qwen2.5-coder-1.5b" in choice.note and "sidecar model bench qwen2.5-coder-1.5b" in choice.note
    _measured("qwen2.5-coder-1.5b", 4000.0, others_cpus=0.05)  # quiet and slow: nothing to say
    assert select.choose("auto", None).note is None


def test_a_cache_entry_written_before_the_load_field_still_reads(models_dir, tmp_path):
    install("qwen2.5-coder-0.5b")
    path = store.model_path(catalog.get("qwen2.5-coder-0.5b"))
    _measured("qwen2.5-coder-0.5b", 400.0)
    cache = tmp_path / "model-speed.json"
    data = __import__("json").loads(cache.read_text())
    for entry in data["entries"].values():
        del entry["others_cpus"]
    cache.write_text(__import__("json").dumps(data))
    figures = speed.cached(path, *select.speed_settings(False))
    assert figures.first_line_ms == 400.0 and figures.others_cpus == 0.0 and not figures.contended


def test_speed_figures_belong_to_one_file_and_machine(models_dir, tmp_path):
    install("qwen2.5-coder-0.5b")
    path = store.model_path(catalog.get("qwen2.5-coder-0.5b"))
    _measured("qwen2.5-coder-0.5b", 400.0)
    assert speed.cached(path, *select.speed_settings(False)).first_line_ms == 400.0
    assert speed.cached(path, 99, 0) is None  # other threads: another measurement
    os.utime(path, ns=(1, 1))  # the file changed: measured again
    assert speed.cached(path, *select.speed_settings(False)) is None
    (tmp_path / "model-speed.json").write_text("{not json")  # a broken cache counts as empty
    assert speed.cached(path, *select.speed_settings(False)) is None


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
