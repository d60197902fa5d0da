// AVX2 x16 Q4_K / Q5_K / Q6_K tiles: kquant_x16_avx2.h compiled for AVX2 (vpmaddubsw products).
#include "kernels/cpu/kquant_x16_avx2.h"

#include "kernels/cpu/kquant_tiles.h"

namespace kvserve::avx2 {

void MatmulQ4_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ4_K>(t); }
void MatmulQ5_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ5_K>(t); }
void MatmulQ6_Kx16(const MatmulTile& t) { MatmulKx16<GgmlType::kQ6_K>(t); }
void MatmulQ4_Kx16TwoPass(const MatmulTile& t) { MatmulKx16<GgmlType::kQ4_K, false>(t); }
void MatmulQ5_Kx16TwoPass(const MatmulTile& t) { MatmulKx16<GgmlType::kQ5_K, false>(t); }
void MatmulQ6_Kx16TwoPass(const MatmulTile& t) { MatmulKx16<GgmlType::kQ6_K, false>(t); }

}  // namespace kvserve::avx2
