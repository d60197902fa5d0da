#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kvserve (Release) in build/.
# Extra arguments are passed to cmake's configure step, e.g. -DKVSERVE_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build_dir=${KVSERVE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
ninja -C "$build_dir" -j "${KVSERVE_JOBS:-$(nproc)}"
