// What the machine offers and what it measures at: the facts `kvserve doctor` prints and the
// ceilings `kvserve bench` sets its results against (design.md, "Performance model").
// Measurements run on the caller's ThreadPool; call them from the thread that owns it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "kernels/cpu/kernels.h"
#include "util/thread_pool.h"

namespace kvserve {

struct MachineInfo {
  std::string cpu_model;         // /proc/cpuinfo "model name", or "unknown"
  std::string cpu_id;            // "GenuineIntel family 6 model 143 stepping 8", or ""
  std::string isa;               // CliBackend().kernels().isa
  int hardware_threads = 0;      // logical CPUs this process may use
  int cores = 0;                 // physical cores (cpuinfo "cpu cores"), 0 if unknown
  uint64_t ram_total_bytes = 0;  // /proc/meminfo MemTotal
  uint64_t ram_available_bytes = 0;
  uint64_t disk_free_bytes = 0;  // statvfs of the working directory, for this user
  std::string disk_path;
};
MachineInfo ReadMachineInfo();

struct Measurement {
  double best = 0;  // the best of the repeats, in the unit of the function
  double mean = 0;
  int repeats = 0;
};

// Streams through a buffer of `bytes` (touched first) with every thread of `pool`, each reading
// its own contiguous part with the active kernels' dot product (widest loads): bytes per second.
Measurement MeasureReadBandwidth(ThreadPool& pool, uint64_t bytes, int repeats);

// Matmul (kernels/matmul.h) of m rows against an n_out × n_in matrix of random `type` weights:
// FLOP per second, counting 2 · m · n_out · n_in.
Measurement MeasureMatmulFlops(const KernelTable& kernels, GgmlType type, int m, int n_out,
                               int n_in, ThreadPool& pool, int repeats);

// One small matmul per weight type through `kernels` and through ScalarKernels() on the same
// inputs (block types: the same Q8_0 activations), compared element by element within
// terms · eps · sum|w·x| (terms = k + 16 for float types, 3 · k/32 + 16 for block types); the
// activation quantizer; and attention and GELU, which must equal the scalar twin bit for bit.
struct KernelCheck {
  std::string what;      // "matmul F32", ..., "quantize Q8_0", "attention", "gelu"
  double max_error = 0;  // the worst |fast - scalar|
  double max_ratio = 0;  // the worst |fast - scalar| / tolerance; <= 1 passes
  bool ok = false;
};
std::vector<KernelCheck> CheckKernelsAgainstScalar(const KernelTable& kernels);

}  // namespace kvserve
