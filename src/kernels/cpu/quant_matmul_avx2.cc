// AVX2 quantized tiles: quant_tiles_avx2.h compiled for AVX2 (vpmaddubsw products).
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles_avx2.h"

namespace kvserve::avx2 {

void MatmulQ8_0(const MatmulTile& t) { MatmulQuant<QType::kQ8_0, false>(t); }
void MatmulQ4_0(const MatmulTile& t) { MatmulQuant<QType::kQ4_0, false>(t); }
void MatmulQ8_0x16(const MatmulTile& t) { MatmulQuant<QType::kQ8_0, true>(t); }
void MatmulQ4_0x16(const MatmulTile& t) { MatmulQuant<QType::kQ4_0, true>(t); }
void MatmulQ8_0x16L2(const MatmulTile& t) {
  MatmulQuant<QType::kQ8_0, true, PrefetchLevel::kL2>(t);
}
void MatmulQ4_0x16L2(const MatmulTile& t) {
  MatmulQuant<QType::kQ4_0, true, PrefetchLevel::kL2>(t);
}

}  // namespace kvserve::avx2
