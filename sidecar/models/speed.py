"""How fast a local model runs on this machine: measured once, cached per machine and model.

``local_model = "auto"`` (:mod:`.select`) picks the largest installed code model whose
*keystroke first line* fits the typing budget; ``sidecar model list`` shows the figures
and ``sidecar model bench [NAME ...]`` measures (again). See docs/engines.md, "Which
model auto picks".

The measurement (:func:`measure`, about 5 s for the 0.5B and 15 s for the 1.5B on 2
CPU cores) runs in a child process (``python -m sidecar.models.speed MODEL``) with the
managed engine's own settings: llama-cpp-python with ``use_extra_bufts`` off (the AMX
guard of :mod:`sidecar.backends.engine_launcher`), the weights read into memory
(``use_mmap`` off), ``n_ctx`` 2,048, the engine's thread
count and GPU offload. It loads the model, then asks for ``DECODE_TOKENS`` (48) greedy
tokens after a cold prompt of ``PREFILL_TOKENS`` (384) tokens of real code (a module of
this package) and times them:

- ``prefill_tps``: prompt tokens per second (the prompt over the time to the first token);
- ``decode_tps``: generated tokens per second after the first;
- ``first_line_ms``: what one keystroke costs in the sidecar's local mode, predicted from
  the two: the suffix window evaluated again (``KEYSTROKE_TOKENS``, 64 tokens: the
  smallest window ``target_ttft_ms`` chooses) plus a first line of ``FIRST_LINE_TOKENS``
  (10) generated, in ms;
- ``load_s``: the model's load time, s;
- ``others_cpus``: how many CPUs other programs at normal priority kept busy, on average,
  during the timed pass that was kept (:class:`.cpu_load.CpuMeter`: ``/proc/stat`` less
  this process's own CPU time, niced programs left out; 0.0 where ``/proc/stat`` cannot be
  read). A measurement while something else runs (a compile, an
  indexer, a second model) reads slow, and ``auto`` would then keep the smaller model
  for good. So after one untimed warm-up pass (it pages the weights in) the child times
  up to ``MAX_PASSES`` (3) passes and stops at the first where ``others_cpus`` is under
  ``CONTENDED_CPUS`` (0.25); when every pass was contended it keeps the fastest and says
  so (``contended``), and ``sidecar model pull`` / ``bench`` / ``list`` tell the user to
  measure again on a quiet machine.

With ``draft="prompt-lookup"`` the same is measured with llama-cpp-python's speculative
decoding by prompt lookup (drafts copied from n-grams of the prompt, checked by the model
in one batch; ``LlamaPromptLookupDecoding``, 10 draft tokens). llama-cpp-python then
keeps the logits of every prompt token (``logits_all``), which costs prefill time; the
figures say whether the trade pays on this machine.

Cache: ``<user cache dir>/sidecar/model-speed.json``; an entry is keyed by the machine
(CPU model, CPU count, threads, GPU offload, llama-cpp-python version and build:
:func:`engine_build_id`) and the model file
(path, size, modification time), so a new machine, a new engine build or a new file is
measured again. A cache file that cannot be read or parsed counts as empty (and is
rewritten by the next measurement); one that cannot be written is logged, never raised.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .cpu_load import CpuMeter

if TYPE_CHECKING:
    from llama_cpp.llama_speculative import LlamaDraftModel

log = logging.getLogger(__name__)

PREFILL_TOKENS = 384
DECODE_TOKENS = 48
KEYSTROKE_TOKENS = 64
FIRST_LINE_TOKENS = 10
#: The typing budget: the largest keystroke first line (ms) for which ``auto`` picks a model.
TYPING_BUDGET_MS = 1000
CACHE_VERSION = 2  # 2: weights loaded, not mapped (figures of version 1 are measured again)
DRAFTS = ("none", "prompt-lookup")
#: Timed passes at most; the first uncontended one is kept.
MAX_PASSES = 3
#: Other programs' average CPU use (in CPUs) from which a pass counts as contended.
CONTENDED_CPUS = 0.25


class SpeedError(RuntimeError):
    """The measurement failed (the model did not load, the child crashed or timed out);
    the message is one line."""


@dataclass(frozen=True)
class Speed:
    """One model's figures on this machine (units in the names; see the module doc)."""

    prefill_tps: float
    decode_tps: float
    first_line_ms: float
    load_s: float
    n_gpu_layers: int
    threads: int
    draft: str = "none"
    measured_at: float = 0.0  # Unix time
    others_cpus: float = 0.0  # CPUs other programs kept busy during the kept pass

    @property
    def contended(self) -> bool:
        """True when other programs kept at least ``CONTENDED_CPUS`` busy in every pass:
        the figures are likely slower than this machine is when quiet."""
        return self.others_cpus >= CONTENDED_CPUS

    @staticmethod
    def predict_first_line_ms(prefill_tps: float, decode_tps: float) -> float:
        """``first_line_ms`` from the two speeds (module doc)."""
        return 1000.0 * (KEYSTROKE_TOKENS / max(prefill_tps, 1e-6) + FIRST_LINE_TOKENS / max(decode_tps, 1e-6))


def contention_note(name: str, figures: Speed) -> str:
    """One line for the user when ``figures`` were measured while other programs kept the
    CPUs busy (``Speed.contended``), else ``""``."""
    if not figures.contended:
        return ""
    return (
        f"{name} was measured while other programs kept about {figures.others_cpus:.1f} CPUs busy, so its "
        f"figures are likely slow; run `sidecar model bench {name}` again on a quiet machine"
    )


def cache_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("sidecar")) / "model-speed.json"


def machine_key(threads: int, n_gpu_layers: int) -> str:
    """The part of a cache key that says which machine and engine build measured."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        engine = version("llama-cpp-python")
    except Exception:  # noqa: BLE001 - not installed: the key says so
        engine = "none"
    return (
        f"{cpu}|cpus={os.cpu_count()}|threads={threads}|gpu_layers={n_gpu_layers}"
        f"|llama-cpp-python={engine}|build={engine_build_id()}"
    )


def engine_build_id() -> str:
    """Which compiled build of llama-cpp-python is installed: the first 12 hex digits of
    the SHA-256 of its CPU backend library (``llama_cpp/lib/libggml-cpu.*``, else
    ``libllama.*``), so that the same version built with other CPU features (scripts/setup's
    AVX-512 build against the AVX2 baseline, docs/engines.md) is measured again. Found
    without importing the package; ``"none"`` when it is not installed or has no library."""
    import hashlib
    import importlib.util

    try:
        spec = importlib.util.find_spec("llama_cpp")
    except (ImportError, ValueError):
        return "none"
    if spec is None or not spec.origin:
        return "none"
    lib = Path(spec.origin).parent / "lib"
    for pattern in ("libggml-cpu.*", "libllama.*", "*ggml-cpu*.dll", "*llama*.dll"):
        for path in sorted(lib.glob(pattern)):
            try:
                return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            except OSError:
                continue
    return "none"


def _model_key(model: Path) -> str:
    st = model.stat()
    return f"{model.resolve()}|{st.st_size}|{st.st_mtime_ns}"


def _key(model: Path, threads: int, n_gpu_layers: int, draft: str) -> str:
    return f"{machine_key(threads, n_gpu_layers)}|{_model_key(model)}|draft={draft}"


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or not isinstance(data.get("entries"), dict):
        return {}
    return data["entries"]


def cached(
    model: Path, threads: int, n_gpu_layers: int, draft: str = "none", *, path: Path | None = None
) -> Speed | None:
    """The cached figures of ``model`` on this machine, or None (never measured here, or
    the file changed)."""
    try:
        key = _key(model, threads, n_gpu_layers, draft)
    except OSError:
        return None
    raw = _read(path or cache_path()).get(key)
    if not isinstance(raw, dict):
        return None
    try:
        fields = {k: raw[k] for k in Speed.__dataclass_fields__ if k in raw}
        return Speed(**fields)  # entries written before a field existed take its default
    except TypeError:
        return None


def store(model: Path, figures: Speed, *, path: Path | None = None) -> None:
    """Add ``figures`` of ``model`` to the cache file (atomically; an unwritable cache is
    logged once, not raised)."""
    path = path or cache_path()
    entries = _read(path)
    entries[_key(model, figures.threads, figures.n_gpu_layers, figures.draft)] = asdict(figures)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps({"version": CACHE_VERSION, "entries": entries}, indent=1), encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        log.warning("cannot write the model speed cache %s: %s", path, exc.strerror or exc)


def measure(
    model: Path,
    *,
    threads: int,
    n_gpu_layers: int,
    draft: str = "none",
    timeout_s: float = 300.0,
    path: Path | None = None,
) -> Speed:
    """Measure ``model`` in a child process (module doc), cache and return the figures.
    Raises :class:`SpeedError` when the child fails or runs past ``timeout_s`` (s)."""
    if draft not in DRAFTS:
        raise SpeedError(f"unknown draft {draft!r}; choose from {', '.join(DRAFTS)}")
    cmd = [
        sys.executable,
        "-m",
        "sidecar.models.speed",
        str(model),
        "--threads",
        str(threads),
        "--n-gpu-layers",
        str(n_gpu_layers),
        "--draft",
        draft,
    ]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise SpeedError(f"measuring {model.name} took over {timeout_s:.0f} s") from None
    except OSError as exc:
        raise SpeedError(f"cannot start the measurement of {model.name}: {exc.strerror or exc}") from None
    if out.returncode != 0:
        tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpeedError(f"measuring {model.name} failed (exit {out.returncode}): {tail}")
    try:
        raw = json.loads(out.stdout.strip().splitlines()[-1])
        figures = Speed(**raw)
    except (ValueError, IndexError, TypeError) as exc:
        raise SpeedError(f"measuring {model.name} gave no figures: {exc}") from None
    store(model, figures, path=path)
    return figures


def _code_tokens(llm, n: int) -> list[int]:
    """``n`` tokens of real code: this package's own modules, concatenated."""
    here = Path(__file__).resolve().parents[1]
    text = ""
    for p in sorted(here.rglob("*.py")):
        text += p.read_text(encoding="utf-8", errors="replace")
        toks = llm.tokenize(text.encode("utf-8"), add_bos=False)
        if len(toks) >= n:
            return toks[:n]
    return llm.tokenize(text.encode("utf-8"), add_bos=False)[:n]


def _timed_pass(llm, prompt: list[int]) -> tuple[float, float]:
    """One cold prompt and ``DECODE_TOKENS`` greedy tokens: (prefill, decode) in tokens/s.
    ``reset()`` first: llama-cpp-python's ``generate`` would otherwise keep the beginning
    an earlier pass left in the KV cache and evaluate only the rest."""
    llm.reset()
    t0 = time.perf_counter()
    first = last = 0.0
    n = 0
    for _tok in llm.generate(prompt, temp=0.0, top_k=1, repeat_penalty=1.0, reset=True):
        n += 1
        now = time.perf_counter()
        if n == 1:
            first = now
        last = now
        if n >= DECODE_TOKENS:
            break
    if n < 2:
        raise SpeedError(f"the model stopped after {n} token(s)")
    return len(prompt) / (first - t0), (n - 1) / (last - first)


def _child(model: str, threads: int, n_gpu_layers: int, draft: str) -> Speed:
    from .llama_safety import disable_extra_buffer_types

    disable_extra_buffer_types()
    import llama_cpp

    draft_model: LlamaDraftModel | None = None  # None is Llama's default: no draft
    if draft == "prompt-lookup":
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        draft_model = LlamaPromptLookupDecoding(num_pred_tokens=10)
    t0 = time.perf_counter()
    llm = llama_cpp.Llama(
        model_path=model,
        n_ctx=2048,
        n_threads=threads,
        n_threads_batch=threads,
        n_gpu_layers=n_gpu_layers,
        logits_all=False,
        use_mmap=False,  # as the managed engine loads it (engine_process.EngineProcess.command)
        verbose=False,
        draft_model=draft_model,
    )
    load_s = time.perf_counter() - t0
    prompt = _code_tokens(llm, PREFILL_TOKENS)
    # Untimed: the first prompt after the load pages the (memory-mapped) weights in.
    for _n, _tok in zip(range(2), llm.generate(prompt[:32], temp=0.0, top_k=1, repeat_penalty=1.0, reset=True)):
        pass
    passes: list[tuple[float, float, float]] = []  # (prefill, decode, others_cpus)
    meter = CpuMeter()
    for _ in range(MAX_PASSES):
        meter.start()
        prefill, decode = _timed_pass(llm, prompt)
        passes.append((prefill, decode, meter.others_cpus()))
        if passes[-1][2] < CONTENDED_CPUS:
            break
    quiet = [p for p in passes if p[2] < CONTENDED_CPUS]
    prefill, decode, others = (quiet or [min(passes, key=lambda p: Speed.predict_first_line_ms(p[0], p[1]))])[0]
    return Speed(
        prefill_tps=round(prefill, 1),
        decode_tps=round(decode, 1),
        first_line_ms=round(Speed.predict_first_line_ms(prefill, decode), 1),
        load_s=round(load_s, 2),
        n_gpu_layers=n_gpu_layers,
        threads=threads,
        draft=draft,
        measured_at=round(time.time(), 1),
        others_cpus=others,
    )


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m sidecar.models.speed",
        description="Measure one GGUF model's speed on this machine; prints JSON.",
    )
    p.add_argument("model")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--n-gpu-layers", type=int, default=0)
    p.add_argument("--draft", choices=DRAFTS, default="none")
    args = p.parse_args(argv)
    try:
        figures = _child(args.model, args.threads, args.n_gpu_layers, args.draft)
    except Exception as exc:  # noqa: BLE001 - the parent reads one line
        print(f"speed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1
    print(json.dumps(asdict(figures)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
