// What a decode's attention pays to read one KV head's part of every slot of a cold KV pool: a pool
// laid out as the KV cache lays out a layer (slots of n_kv_heads head rows side by side; here 3
// heads of 64 f32, SmolLM2-135M's 768-byte slots), on huge pages, evicted from every cache level
// before each timing by reading a 128 MiB buffer. Rows, one thread, best of 30:
//   all lines            every line of every slot, in order (the pool's plain read)
//   head 0               the 4 lines of head 0 in each slot (a third of the bytes)
//   heads 0, 1, 2 apart  head 0's lines of every slot, then head 1's, then head 2's (the passes
//                        the attention kernel made before attend_group: one per KV head)
//   head 0, L2 hot       head 0's lines again, right after reading them
// On the Zen 4 VM of docs/benchmarks.md, "head 0" took as long as "all lines" and "heads apart"
// 2.5-3 times as long: the hardware prefetchers do not follow a part of each slot.
//
// Not part of the CMake build; compile ad hoc (after a build of the project):
//   g++ -std=c++20 -O2 -Isrc bench/kv_slot_read_bench.cc build/libkvserve_util.a -o /tmp/kv_slot
//   /tmp/kv_slot [SLOTS]   (default 512 slots; 4096 for a pool larger than L2)
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "util/large_memory.h"

namespace {

constexpr size_t kSlotBytes = 768;  // 3 KV heads x 64 f32
constexpr size_t kHeadBytes = 256;
constexpr size_t kFlushBytes = size_t{128} << 20;

volatile long g_sink;

// XOR-folds the 64-byte lines [offset, offset + length) of each of `slots` slots.
__attribute__((target("avx512f"))) long ReadLines(const char* pool, size_t slots, size_t offset,
                                                  size_t length) {
  __m512i acc = _mm512_setzero_si512();
  for (size_t s = 0; s < slots; ++s) {
    for (size_t o = 0; o < length; o += 64) {
      acc = _mm512_xor_si512(acc, _mm512_load_si512(pool + s * kSlotBytes + offset + o));
    }
  }
  return _mm512_reduce_add_epi64(acc);
}

}  // namespace

int main(int argc, char** argv) {
  const size_t slots = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  char* pool = static_cast<char*>(kvserve::AllocateLarge(slots * kSlotBytes));
  char* flush = static_cast<char*>(kvserve::AllocateLarge(kFlushBytes));
  std::memset(pool, 1, slots * kSlotBytes);
  std::memset(flush, 2, kFlushBytes);
  auto evict = [&] {
    long sum = 0;
    for (size_t i = 0; i < kFlushBytes; i += 64) sum += flush[i];
    g_sink = sum;
  };
  struct Row {
    const char* name;
    size_t bytes;
    bool hot;
    long (*read)(const char*, size_t);
  };
  const Row rows[] = {
      {"all lines", kSlotBytes, false,
       [](const char* p, size_t n) { return ReadLines(p, n, 0, kSlotBytes); }},
      {"head 0", kHeadBytes, false,
       [](const char* p, size_t n) { return ReadLines(p, n, 0, kHeadBytes); }},
      {"heads 0, 1, 2 apart", kSlotBytes, false,
       [](const char* p, size_t n) {
         long sum = 0;
         for (size_t h = 0; h < 3; ++h) sum += ReadLines(p, n, h * kHeadBytes, kHeadBytes);
         return sum;
       }},
      {"head 0, L2 hot", kHeadBytes, true,
       [](const char* p, size_t n) { return ReadLines(p, n, 0, kHeadBytes); }},
  };
  std::printf("%zu slots of %zu bytes (%zu KiB)\n", slots, kSlotBytes, slots * kSlotBytes / 1024);
  for (const Row& row : rows) {
    double best = 1e30;
    for (int round = 0; round < 30; ++round) {
      if (row.hot) {
        g_sink = row.read(pool, slots);
      } else {
        evict();
      }
      const auto t0 = std::chrono::steady_clock::now();
      g_sink = row.read(pool, slots);
      best = std::min(best,
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-20s %8.2f us  %5.1f GB/s of the bytes it needs\n", row.name, best * 1e6,
                static_cast<double>(row.bytes * slots) / best / 1e9);
  }
  kvserve::FreeLarge(pool);
  kvserve::FreeLarge(flush);
}
