// What a backend measures and checks of itself (Backend::MeasureReadBandwidth,
// MeasureMatmulFlops, CheckKernels): the ceilings `kvserve bench` sets its results against and
// the self-test `kvserve doctor` prints (design.md, "Performance model").
#pragma once

#include <string>

namespace kvserve {

struct Measurement {
  double best = 0;  // the best of the repeats, in the unit of the function
  double mean = 0;
  int repeats = 0;
};

// One kernel compared with the backend's reference for it (the CPU: the scalar twin).
struct KernelCheck {
  std::string what;      // "matmul F32", ..., "quantize Q8_0", "attention", "gelu"
  double max_error = 0;  // the worst |fast - reference|
  double max_ratio = 0;  // the worst |fast - reference| / tolerance; <= 1 passes
  bool ok = false;
};

}  // namespace kvserve
