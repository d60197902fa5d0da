// One version of the AVX-512 float-weight tiles for bench/float_prefill_ab.cc: compiles the source
// named by FPAB_SOURCE (a copy of src/kernels/cpu/float_matmul_avx512.cc, from any commit or
// edited) with its namespace kvserve::avx512 renamed to kvserve::FPAB_NS, so that several copies
// link into one program, and gives it as a function named FPAB_NAME (RunA .. RunD). Build it with
// the AVX-512 flags of CMakeLists.txt (AVX512_FLAGS); see float_prefill_ab.cc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define avx512 FPAB_NS
#include FPAB_SOURCE

namespace kvserve {

void FPAB_NAME(GgmlType type, const MatmulTile& t) {
  if (type == GgmlType::kF32) {
    FPAB_NS::MatmulF32(t);
  } else if (type == GgmlType::kF16) {
    FPAB_NS::MatmulF16(t);
  } else {
    FPAB_NS::MatmulBf16(t);
  }
}

}  // namespace kvserve
