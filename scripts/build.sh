#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds kvserve (Release) in build/.
#   scripts/build.sh                    everything: kvserve, the tests, the benchmarks
#   scripts/build.sh --target kvserve   the kvserve binary alone (README command 1)
# Other arguments are passed to cmake's configure step, e.g. -DKVSERVE_SANITIZE=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
configure_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--target" ] && [ $# -ge 2 ]; then
    targets+=("$2")
    shift 2
  else
    configure_args+=("$1")
    shift
  fi
done
scripts/install-deps.sh
build_dir=${KVSERVE_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release ${configure_args[@]+"${configure_args[@]}"} >/dev/null
ninja -C "$build_dir" -j "${KVSERVE_JOBS:-$(nproc)}" ${targets[@]+"${targets[@]}"}
