// AVX-VNNI x16 Q4_1 / Q5_0 / Q5_1 / IQ4_NL / MXFP4 tiles: blocks32_x16_avx2.h with vpdpbusd on 256
// bits.
#include "kernels/cpu/blocks32_x16_avx2.h"

namespace kvserve::avxvnni {

void MatmulQ4_1x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ4_1>(t); }
void MatmulQ5_0x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_0>(t); }
void MatmulQ5_1x16(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_1>(t); }
void MatmulIq4Nlx16(const MatmulTile& t) { MatmulX16<GgmlType::kIQ4_NL>(t); }
void MatmulMxfp4x16(const MatmulTile& t) { MatmulX16<GgmlType::kMXFP4>(t); }
void MatmulQ4_1x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ4_1, PrefetchLevel::kL2>(t); }
void MatmulQ5_0x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_0, PrefetchLevel::kL2>(t); }
void MatmulQ5_1x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kQ5_1, PrefetchLevel::kL2>(t); }
void MatmulIq4Nlx16L2(const MatmulTile& t) { MatmulX16<GgmlType::kIQ4_NL, PrefetchLevel::kL2>(t); }
void MatmulMxfp4x16L2(const MatmulTile& t) { MatmulX16<GgmlType::kMXFP4, PrefetchLevel::kL2>(t); }

}  // namespace kvserve::avxvnni
