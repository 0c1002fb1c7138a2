"""Our launcher for the managed engine: llama-cpp-python's server with weights kept out of
llama.cpp's "extra" buffer types.

Run as ``python -m sidecar.backends.engine_launcher [llama_cpp.server arguments]``; it is
the child process that :class:`sidecar.backends.managed_engine.ManagedEngine` starts.

Why it exists (docs/architecture.md, "The embedded engine"): pip builds llama-cpp-python
for the build machine's CPU. When that CPU advertises Intel AMX (``amx_tile``), ggml
registers an AMX buffer type and, with the model parameter ``use_extra_bufts`` at its
default (true), moves the weights into it. On virtual machines that advertise AMX but
cannot run it, the first prompt longer than one token dies with SIGSEGV in
``ggml_backend_amx_mul_mat`` (ggml-org/llama.cpp#20824, closed unfixed). Setting
``use_extra_bufts = false`` keeps the weights in ordinary CPU (or GPU) buffers whatever
the wheel was built with, so the crashing path is never taken. llama-cpp-python 0.3.36
has the field in ``llama_model_params`` but its server has no option for it, so this
launcher sets it by wrapping ``llama_model_default_params`` (the function both
``Llama.__init__`` and its internals call to start their parameters) before the server
imports the model. The cost: no weight repacking (CPU_REPACK/AMX), which for the shipped
135M model is within noise (docs/engines.md, "Embedded engine figures").

``SIDECAR_ENGINE_FAULT=segv_on_prompt`` makes the engine kill itself with SIGSEGV on the
first evaluation of more than one token, the way the AMX crash looks from outside (a
one-token warm-up passes). ``SIDECAR_ENGINE_FAULT=slow_prompt`` adds 1 s to every
evaluation of more than one token, as a long prompt on a busy CPU does. They exist for
tests of the demo, doctor, restart policy and deadlines.

Threads (:mod:`sidecar.backends.engine_threads`): each evaluation runs with as many
threads as other programs leave CPUs free, at most what the engine started with, since a
llama.cpp thread that another program preempts stalls every graph step.

Token log-probabilities without ``logits_all`` (:func:`install_logprobs`): the managed
engine runs with ``logits_all`` off (a n_ctx x vocabulary logits buffer otherwise; what it
costs is in docs/architecture.md, "Local code models"), and llama-cpp-python then refuses
a request's ``logprobs``. The confidence gate (``completion/gate.py``) only needs the
log-probability of each sampled token, which the
logits of the last decoded position already hold when the token is sampled. So the
launcher reads that row right after each sample (one log-sum-exp over the vocabulary,
~0.5 ms a token on this machine against ~25 ms a token of generation), and puts the values
on the streamed chunks in OpenAI's legacy completions shape (``logprobs.tokens`` /
``logprobs.token_logprobs``; ``top_logprobs`` is null for each token). Only requests that ask for
``logprobs`` pay for it.
"""

from __future__ import annotations

import math
import os
import signal
import sys
from typing import TYPE_CHECKING

from sidecar.backends.engine_threads import install_thread_governor
from sidecar.models.llama_safety import disable_extra_buffer_types

if TYPE_CHECKING:
    from llama_cpp.llama_types import CompletionLogprobs

FAULT_ENV = "SIDECAR_ENGINE_FAULT"


def install_fault(kind: str) -> None:
    """Test hook: ``segv_on_prompt`` crashes on the first multi-token evaluation;
    ``slow_prompt`` sleeps 1 s before each one."""
    if kind not in ("segv_on_prompt", "slow_prompt"):
        return
    import time

    import llama_cpp

    original_eval = llama_cpp.Llama.eval

    def crash() -> None:
        sys.stderr.write("sidecar engine launcher: injected fault: SIGSEGV on a multi-token prompt\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSEGV)

    fault = crash if kind == "segv_on_prompt" else (lambda: time.sleep(1.0))

    def faulty_eval(self, tokens):
        if len(tokens) > 1:
            fault()
        return original_eval(self, tokens)

    llama_cpp.Llama.eval = faulty_eval  # type: ignore[method-assign]


def install_logprobs() -> None:
    """Let ``/v1/completions`` answer ``logprobs`` with ``logits_all`` off (module doc).

    Wraps ``Llama.sample`` (record the sampled token's natural-log probability from the
    logits row it was sampled from, while a request asked for them) and
    ``Llama._create_completion`` (ask the original without ``logprobs``, then attach the
    recorded tokens to each chunk: ``{"tokens": [str], "token_logprobs": [float],
    "text_offset": [int], "top_logprobs": [null, ...]}``, the values recorded since the chunk
    before). A chunk's tokens need not be exactly its text: the engine holds back text
    that may start a stop sequence, so a token can come one chunk before its text.
    With ``logits_all`` on, llama-cpp-python's own path is used unchanged."""
    import llama_cpp
    import llama_cpp.llama_cpp as lib
    import numpy as np

    Llama = llama_cpp.Llama
    if getattr(Llama.sample, "_sidecar_logprobs", False):
        return
    original_sample = Llama.sample
    original_completion = Llama._create_completion

    def sample(self, *args, **kwargs):
        token = original_sample(self, *args, **kwargs)
        record = getattr(self, "_sidecar_logprobs", None)
        if record is not None:
            try:
                idx = kwargs.get("idx")
                ridx = idx - self.n_tokens if idx is not None else -1
                ptr = lib.llama_get_logits_ith(self._ctx.ctx, ridx)
                if ptr:
                    row = np.ctypeslib.as_array(ptr, shape=(self._n_vocab,))
                    top = float(row.max())
                    lse = top + math.log(float(np.exp(row - top, dtype=np.float64).sum()))
                    record.append((int(token), float(row[token]) - lse))
            except Exception as e:  # noqa: BLE001 - a missing value must never cost the completion
                sys.stderr.write(f"sidecar engine launcher: no log-probability for a token: {e!r}\n")
        return token

    def _create_completion(self, *args, **kwargs):
        if kwargs.get("logprobs") is None or self._logits_all:
            return (yield from original_completion(self, *args, **kwargs))
        kwargs["logprobs"] = None
        record: list[tuple[int, float]] = []
        self._sidecar_logprobs = record
        offset = 0
        try:
            for chunk in original_completion(self, *args, **kwargs):
                taken = record[:]
                del record[:]
                toks = [self.detokenize([t]).decode("utf-8", "ignore") for t, _ in taken]
                offsets = []
                for t in toks:
                    offsets.append(offset)
                    offset += len(t)
                lp: CompletionLogprobs = {
                    "tokens": toks,
                    "text_offset": offsets,
                    "token_logprobs": [v for _, v in taken],
                    "top_logprobs": [None] * len(toks),
                }
                for choice in chunk.get("choices") or ():
                    choice["logprobs"] = lp
                yield chunk
        finally:
            self._sidecar_logprobs = None

    sample._sidecar_logprobs = True  # type: ignore[attr-defined]
    Llama.sample = sample  # type: ignore[method-assign]
    Llama._create_completion = _create_completion  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    """Start llama-cpp-python's server with ``argv`` (its own command-line options)."""
    disable_extra_buffer_types()
    install_logprobs()
    install_thread_governor()
    install_fault(os.environ.get(FAULT_ENV, ""))
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    sys.stderr.write(
        f"sidecar engine launcher: llama-cpp-python {llama_cpp.__version__}, "
        f"use_extra_bufts=false; system info: {info}\n"
    )
    sys.stderr.flush()
    from llama_cpp.server.__main__ import main as server_main

    sys.argv = ["llama_cpp.server", *(sys.argv[1:] if argv is None else argv)]
    server_main()


if __name__ == "__main__":
    main()
