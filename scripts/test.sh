#!/usr/bin/env bash
# Builds kvserve and runs the whole test suite (GoogleTest through CTest), then a short fuzzing
# run of the file parsers when clang's libFuzzer is available.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/install-npm.sh  # the official openai client for server_openai_client_test
ctest --test-dir "${KVSERVE_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" --timeout 900
if [ -x scripts/fuzz.sh ] && command -v clang++ >/dev/null; then
  scripts/fuzz.sh "${KVSERVE_FUZZ_SECONDS:-30}"
fi
