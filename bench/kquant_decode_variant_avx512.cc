// One variant of the AVX-512 K-quant x16 tile for bench/kquant_decode_ab.cc: compiles the source
// named by KQAB_SOURCE (a copy of src/kernels/cpu/kquant_x16_avx512.cc, from any commit) with its
// namespace kvserve::avx512 renamed to kvserve::KQAB_NS, so that several copies link into one
// program, and gives it as a function named KQAB_NAME (RunA .. RunD). Build it with the AVX-512
// flags of CMakeLists.txt (AVX512_FLAGS); see kquant_decode_ab.cc.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#define avx512 KQAB_NS
#include KQAB_SOURCE

namespace kvserve {

void KQAB_NAME(bool q6, const MatmulTile& t) {
  if (q6) {
    KQAB_NS::MatmulQ6_Kx16(t);
  } else {
    KQAB_NS::MatmulQ4_Kx16(t);
  }
}

}  // namespace kvserve
