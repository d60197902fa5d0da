#!/usr/bin/env bash
# Builds kvserve with AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/) and runs the
# tests that exercise untrusted input, the cache bookkeeping and the engine under them (the server
# tests' `kvserve serve` children are the sanitized binary too, so hostile requests run under it).
# Any report fails the run (-fno-sanitize-recover, halt_on_error).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${KVSERVE_ASAN_BUILD:-build-asan}"
tests=(gguf_test safetensors_test block_manager_test engine_test tokenizer_test reference_test
       kernels_test attention_test packed_weights_test hf_folder_test args_test cli_help_test
       request_limits_test tenant_limiter_test server_limits_test server_hostile_test
       kquant_simd_test packed_blocks32_test spec_decode_test kv_map_test kv_disk_test
       context_shift_test kv_window_test hf_normalizer_test large_memory_test
       qwen35_mtp_test t5_test t5_engine_test t5_tokenizer_test embedder_test
       embeddings_server_test)
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DKVSERVE_SANITIZE=ON >/dev/null
ninja -C "$build" -j "$(nproc)" kvserve "${tests[@]}"
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for t in "${tests[@]}"; do
  echo "sanitize: $t" >&2
  "$build/tests/$t" --gtest_brief=1
done
