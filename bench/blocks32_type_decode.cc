// Decode (m = 1) time of the packed 32-element block types side by side, per byte and per weight:
// the CPU's best kernel table's x16 tile and its L2-prefetch decode form (KernelTable::
// decode_*_x16_l2) for each type in TYPES (default "iq4_nl,mxfp4"), the way the engine runs them
// (ThreadPool of THREADS, default 2; ParallelOwnedChunks over 16-row groups) on tinyllama's
// shapes, with enough copies of each matrix (256 MB) that every call reads from DRAM. Types and
// forms alternate within each round, so a drift of the machine's bandwidth hits them alike;
// medians of ROUNDS (30) rounds.
//
// Not part of the CMake build:
//   g++ -std=c++20 -O2 -Isrc -I. bench/blocks32_type_decode.cc
//   build/libkvserve_{kernels,kv,io,util}.a
//       -lpthread -o /tmp/b32types && /tmp/b32types
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench/decode_ab_problem.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

namespace {

using kvserve::GgmlType;

struct Entry {
  GgmlType type;
  const char* form;  // "L1" (the x16 tile) or "L2" (its decode alternative)
  kvserve::MatmulTileFn fn;
  std::shared_ptr<const kvserve::bench::DecodeProblem> problem;  // shared by a type's forms
  std::vector<double> seconds;
};

std::vector<GgmlType> TypesFromEnv() {
  std::vector<GgmlType> types;
  std::stringstream list(std::getenv("TYPES") != nullptr ? std::getenv("TYPES") : "iq4_nl,mxfp4");
  for (std::string name; std::getline(list, name, ',');) {
    if (const auto t = kvserve::ParseGgmlType(name)) types.push_back(*t);
  }
  return types;
}

}  // namespace

int main() {
  const kvserve::KernelTable& table = kvserve::KernelsFor("");
  const int threads = std::getenv("THREADS") != nullptr ? std::atoi(std::getenv("THREADS")) : 2;
  const int rounds = std::getenv("ROUNDS") != nullptr ? std::atoi(std::getenv("ROUNDS")) : 30;
  kvserve::ThreadPool pool(threads);
  std::printf("table %s, %d threads, medians of %d rounds\n", table.isa, threads, rounds);
  for (auto [n, k] : std::vector<std::pair<int, int>>{{2048, 2048}, {5632, 2048}, {2048, 5632}}) {
    std::vector<Entry> entries;
    for (GgmlType type : TypesFromEnv()) {
      const size_t bytes = kvserve::PackedGroupBytes(type, k) * (n / 16);
      const int copies = std::max<int>(4, static_cast<int>(256e6 / bytes));
      auto problem =
          std::make_shared<kvserve::bench::DecodeProblem>(type, GgmlType::kQ8_0, n, k, copies);
      for (auto [form, fn] : {std::pair{"L1", kvserve::PackedMatmulFor(table, type)},
                              std::pair{"L2", kvserve::DecodeAlternativeFor(table, type, true)}}) {
        if (fn == nullptr) continue;
        entries.push_back({type, form, fn, problem, {}});
      }
    }
    std::vector<float> y(n);
    for (int round = 0; round < rounds; ++round) {
      for (Entry& e : entries) {
        int next_copy = round;
        const int calls = static_cast<int>(e.problem->copies.size());
        e.seconds.push_back(
            kvserve::bench::TimeDecodeMatmul(pool, e.fn, *e.problem, calls, next_copy, y));
      }
    }
    for (Entry& e : entries) {
      std::sort(e.seconds.begin(), e.seconds.end());
      const double median = e.seconds[e.seconds.size() / 2];
      const double bytes = static_cast<double>(e.problem->bytes());
      std::printf("%-6s %-2s %5dx%-5d %6.1f GB/s %6.1f ps/byte %6.1f ps/weight (%7.1f us)\n",
                  kvserve::GgmlTypeName(e.type), e.form, n, k, bytes / median / 1e9,
                  median / bytes * 1e12, median / (static_cast<double>(n) * k) * 1e12,
                  median * 1e6);
    }
  }
}
