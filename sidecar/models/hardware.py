"""What this machine offers a local model: free memory, a GPU the engine can use.

Cheap facts read once per process, for choosing a model (``local_model = "auto"``,
:mod:`.select`) and the default GPU offload. Nothing here imports llama-cpp-python (it
loads a native library); the build's GPU support is read from the libraries its wheel
ships (``libggml-cuda.so`` and friends, llama-cpp-python 0.3.x layout).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
from pathlib import Path

#: ggml backend libraries that mean "this build can offload to a GPU".
_GPU_LIBS = ("libggml-cuda", "libggml-hip", "libggml-vulkan", "libggml-metal", "libggml-sycl")


def available_ram_mb() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` in MiB, or None where there is none (not Linux)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@functools.lru_cache(maxsize=1)
def gpu_free_mb() -> int | None:
    """Free memory of the largest NVIDIA GPU in MiB (``nvidia-smi``), or None when there
    is no NVIDIA GPU or driver. Runs ``nvidia-smi`` at most once per process (3 s bound)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=memory.free", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=3,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    values = []
    for line in out.stdout.splitlines():
        try:
            values.append(int(float(line.strip())))
        except ValueError:
            continue
    return max(values) if out.returncode == 0 and values else None


@functools.lru_cache(maxsize=1)
def engine_offloads() -> bool:
    """True when the installed llama-cpp-python carries a GPU backend library (CUDA, HIP,
    Vulkan, Metal or SYCL), read from its package folder without importing it."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.origin:
        return False
    root = Path(spec.origin).parent
    try:
        names = [p.name for p in root.rglob("libggml-*")]
    except OSError:
        return False
    return any(n.startswith(_GPU_LIBS) for n in names)


def usable_gpu_mb() -> int | None:
    """Free GPU memory in MiB when the engine build can use the GPU, else None."""
    if not engine_offloads():
        return None
    return gpu_free_mb()


def default_threads() -> int:
    """Decode threads when ``local_threads`` is unset: every usable CPU on a machine with
    at most four (llama-cpp-python's server would take half, one thread on two cores),
    else half of them (about the physical cores where SMT doubles the count), as
    llama.cpp's own default counts physical cores. Prompt evaluation uses every CPU
    either way (the server's ``n_threads_batch``). Measured with the 0.5B code model on
    2 cores: the first suggestion after opening a 1,382-line file 2.61-2.69 s with two
    decode threads against 2.83-2.87 s with one."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return n if n <= 4 else n // 2
