#!/usr/bin/env bash
# ThreadSanitizer over the engine and the server: builds kvserve and their tests with
# -fsanitize=thread (build-tsan/), runs them, and fails on any report, the `kvserve serve`
# children's included (every process writes its reports under build-tsan/tsan-reports/, which
# must stay empty). The engine's step loop, the request streams, the HTTP listener's poll loop
# and workers, the per-key limiter and the drain path all run here under TSan.
#   scripts/tsan.sh            # the tests below
#   scripts/tsan.sh TEST...    # only these
# Suppressions, each with its reason: scripts/tsan.supp.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KVSERVE_TSAN_BUILD:-build-tsan}"
tests=(engine_core_test scheduler_test engine_test tenant_limiter_test server_limits_test
       server_test server_hostile_test)
[ $# -gt 0 ] && tests=("$@")
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -fno-omit-frame-pointer" \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
ninja -C "$build" -j "${KVSERVE_TSAN_BUILD_JOBS:-$(nproc)}" kvserve "${tests[@]}"
reports="$PWD/$build/tsan-reports"
rm -rf "$reports"
mkdir -p "$reports"
export TSAN_OPTIONS="log_path=$reports/tsan second_deadlock_stack=1 history_size=4 \
suppressions=$PWD/scripts/tsan.supp"
status=0
for t in "${tests[@]}"; do
  echo "tsan: $t" >&2
  "$build/tests/$t" --gtest_brief=1 || status=1
done
if compgen -G "$reports/tsan*" >/dev/null; then
  echo "tsan: ThreadSanitizer reports (one file per process):" >&2
  for f in "$reports"/tsan*; do
    echo "== $f" >&2
    cat "$f" >&2
  done
  status=1
fi
[ "$status" = 0 ] && echo "tsan: ${#tests[@]} test binaries, no reports"
exit "$status"
