#!/usr/bin/env bash
# Builds kvserve and runs the whole test suite (GoogleTest and the Python client suites through
# CTest), then a short fuzzing run of the file parsers when clang's libFuzzer is available.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/venv.sh  # the Python tools: the openai SDK and llm suites of tests/clients
# The real models (fetched once into models/): the client suites talk to SmolLM2; the llama.cpp
# comparisons read both.
scripts/get-model.sh smollm2-135m >/dev/null
scripts/get-model.sh gemma3-270m >/dev/null
ctest --test-dir "${KVSERVE_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 900
if [ -x scripts/fuzz.sh ] && command -v clang++ >/dev/null; then
  scripts/fuzz.sh "${KVSERVE_FUZZ_SECONDS:-30}"
fi
