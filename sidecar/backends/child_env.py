"""The environment a child process of ours (the managed engine) gets: only what it needs.

An allow-list, not a deny-list: the child sees the variables that locate programs,
libraries, locales and temporary files, the knobs of the runtimes it uses (Python,
OpenMP, BLAS, CUDA/ROCm, ggml/llama.cpp), and nothing else, so no API key, token or
password of ours or the user's reaches it. A variable whose value equals one of the
``secrets`` given is dropped even when its name is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

#: Variables passed through by exact name.
ALLOWED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "TMPDIR",
        "TMP",
        "TEMP",
        "PWD",
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "DYLD_LIBRARY_PATH",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONUNBUFFERED",
        "SYSTEMROOT",
        "WINDIR",
        "COMSPEC",
        "PATHEXT",  # Windows essentials
        "XDG_CACHE_HOME",
        "XDG_RUNTIME_DIR",
        "OPENBLAS_CORETYPE",
        "OPENBLAS_L2_SIZE",
        "OPENBLAS_NUM_THREADS",
    }
)

#: Variables passed through by prefix (runtime knobs; none of these carries a secret).
ALLOWED_PREFIXES = (
    "LC_",
    "OMP_",
    "KMP_",
    "MKL_",
    "GOMP_",
    "CUDA_",
    "NVIDIA_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "GGML_",
    "LLAMA_",
    "SIDECAR_ENGINE_",
)

#: Name fragments that always mean "secret", even under an allowed prefix.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def child_environment(
    extra: Mapping[str, str] | None = None,
    *,
    secrets: Iterable[str | None] = (),
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The allowed part of ``environ`` (default ``os.environ``) plus ``extra``.

    Drops every variable whose name contains KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or
    AUTH, and every variable whose value equals a non-empty string in ``secrets`` (e.g.
    the configured API key), including those in ``extra``.
    """
    src = os.environ if environ is None else environ
    blocked = {s for s in secrets if s}
    out: dict[str, str] = {}
    for name, value in [*src.items(), *(extra or {}).items()]:
        upper = name.upper()
        allowed = upper in ALLOWED_NAMES or upper.startswith(ALLOWED_PREFIXES)
        if not allowed and not (extra and name in extra):
            continue
        if any(word in upper for word in _SECRET_WORDS) or value in blocked:
            out.pop(name, None)
            continue
        out[name] = value
    return out
