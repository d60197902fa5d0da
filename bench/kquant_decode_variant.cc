// One variant of the AVX2 K-quant x16 tile for bench/kquant_decode_ab.cc: compiles the header named
// by KQAB_HEADER (a copy of src/kernels/cpu/kquant_x16_avx2.h, from any commit) into a function
// named KQAB_NAME (RunA .. RunD). Build it with -mavx2 -mfma -mf16c; see kquant_decode_ab.cc.
#include "kernels/cpu/kernels.h"
#include KQAB_HEADER

namespace kvserve {

void KQAB_NAME(bool q6, const MatmulTile& t) {
  if (q6) {
    MatmulKx16<GgmlType::kQ6_K>(t);
  } else {
    MatmulKx16<GgmlType::kQ4_K>(t);
  }
}

}  // namespace kvserve
