// AVX-512 (F, BW, VL, DQ, VNNI, BF16) kernels: Q8_0 activation quantization and the vector
// helpers, and the table. The matmuls live in float_matmul_avx512.cc and quant_matmul_avx512.cc.
//
// Everything here is in an anonymous namespace and uses intrinsics only (no inline helpers from
// shared headers), so no AVX-512 code can leak into other translation units through COMDAT folding.
// The one shared helper, kv_exp_avx512.h, is itself in an anonymous namespace and included only by
// AVX-512 translation units.
#include "kernels/cpu/immintrin_avx512.h"

#include <cassert>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/float_matmul.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/kv_exp_avx512.h"
#include "kernels/cpu/quant_matmul.h"
#include "kernels/cpu/quant_tiles_scalar.h"
#include "kernels/cpu/recurrent_rows.h"

namespace kvserve {

namespace {

constexpr int kLanes = 16;

inline float HSum(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// Same arithmetic as the scalar twin: d = amax / 127 (f16-stored, rounded to nearest even),
// quants = nearbyint(x * (1 / d)) under the default rounding mode (ties to even).
void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  assert(k % 32 == 0);
  const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  for (int b = 0; b < k / 32; ++b) {
    const __m512 v0 = _mm512_loadu_ps(x + 32 * b);
    const __m512 v1 = _mm512_loadu_ps(x + 32 * b + 16);
    const __m512 a = _mm512_max_ps(_mm512_and_ps(v0, sign_mask), _mm512_and_ps(v1, sign_mask));
    const float amax = _mm512_reduce_max_ps(a);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m128i h = _mm_cvtps_ph(_mm_set_ss(d), _MM_FROUND_TO_NEAREST_INT);
    const uint16_t scale = static_cast<uint16_t>(_mm_extract_epi16(h, 0));
    std::memcpy(&out[b].scale, &scale, sizeof(scale));
    const __m512 idv = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv));
    const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants), _mm512_cvtsepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16), _mm512_cvtsepi32_epi8(q1));
  }
}

// Two accumulators (even and odd 16-lane steps), added lane-wise, then HSum.
float DotF32(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps();
  __m512 acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 2 * kLanes <= n; i += 2 * kLanes) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + kLanes), _mm512_loadu_ps(b + i + kLanes), acc1);
  }
  for (; i < n; i += kLanes) {
    const int left = n - i < kLanes ? n - i : kLanes;
    const __mmask16 mask = static_cast<__mmask16>((1u << left) - 1);
    acc0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(mask, a + i), _mm512_maskz_loadu_ps(mask, b + i),
                           acc0);
  }
  return HSum(_mm512_add_ps(acc0, acc1));
}

// The scalar twin's branches as masks; the f16 rounding of _mm512_cvtps_ph is the scalar
// FloatToFp16's (nearest even). A lane's gather reads entries h and h + 1 and keeps h.
void GeluF16Table(const uint16_t* table, float* x, int n) {
  const __m512 low = _mm512_set1_ps(-10.0f);
  const __m512 high = _mm512_set1_ps(10.0f);
  for (int i = 0; i < n; i += kLanes) {
    const __mmask16 live = n - i >= kLanes ? static_cast<__mmask16>(0xffff)
                                           : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(live, x + i);
    const __mmask16 zero = _mm512_cmp_ps_mask(v, low, _CMP_LE_OQ);
    const __mmask16 lookup = _mm512_cmp_ps_mask(v, high, _CMP_LT_OQ) & ~zero;
    const __m512i h = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    const __m512i entries =
        _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lookup, h, table, 2);
    const __m512 gelu = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(entries));
    __m512 out = _mm512_mask_mov_ps(v, lookup, gelu);
    out = _mm512_mask_mov_ps(out, zero, _mm512_setzero_ps());
    _mm512_mask_storeu_ps(x + i, live, out);
  }
}

void SwiGlu(float* gate, const float* up, int n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += kLanes) {
    const __mmask16 live = n - i >= kLanes ? static_cast<__mmask16>(0xffff)
                                           : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 g = _mm512_maskz_loadu_ps(live, gate + i);
    const __m512 e = avx512::KvExp(_mm512_xor_ps(g, _mm512_set1_ps(-0.0f)));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(gate + i, live, _mm512_mul_ps(silu, _mm512_maskz_loadu_ps(live, up + i)));
  }
}

constexpr KernelTable kAvx512 = {
    .isa = "avx512",
    .matmul_f32 = avx512::MatmulF32,
    .matmul_f16 = avx512::MatmulF16,
    .matmul_bf16 = avx512::MatmulBf16,
    .matmul_q8_0 = avx512::MatmulQ8_0,
    .matmul_q4_0 = avx512::MatmulQ4_0,
    .matmul_q8_0_x16 = avx512::MatmulQ8_0x16,
    .matmul_q4_0_x16 = avx512::MatmulQ4_0x16,
    .matmul_q4_k_x16 = avx512::MatmulQ4_Kx16,
    .matmul_q5_k_x16 = avx512::MatmulQ5_Kx16,
    .matmul_q6_k_x16 = avx512::MatmulQ6_Kx16,
    .matmul_q4_1_x16 = avx512::MatmulQ4_1x16,
    .matmul_q5_0_x16 = avx512::MatmulQ5_0x16,
    .matmul_q5_1_x16 = avx512::MatmulQ5_1x16,
    .matmul_iq4_nl_x16 = avx512::MatmulIq4Nlx16,
    .matmul_mxfp4_x16 = avx512::MatmulMxfp4x16,
    .matmul_f32_x16 = avx512::MatmulF32X16,
    .matmul_f16_x16 = avx512::MatmulF16X16,
    .matmul_bf16_x16 = avx512::MatmulBf16X16,
    .decode_q4_k_x16_alt = avx512::MatmulQ4_Kx16NoPrefetch,
    .decode_q5_k_x16_alt = avx512::MatmulQ5_Kx16NoPrefetch,
    .decode_q6_k_x16_alt = avx512::MatmulQ6_Kx16NoPrefetch,
    .kquant_decode_first_name = "prefetch",
    .kquant_decode_alt_name = "no prefetch",
    .decode_f32_l2 = avx512::MatmulF32L2,
    .decode_f16_l2 = avx512::MatmulF16L2,
    .decode_bf16_l2 = avx512::MatmulBf16L2,
    .decode_q8_0_x16_l2 = avx512::MatmulQ8_0x16L2,
    .decode_q4_0_x16_l2 = avx512::MatmulQ4_0x16L2,
    .decode_q4_1_x16_l2 = avx512::MatmulQ4_1x16L2,
    .decode_q5_0_x16_l2 = avx512::MatmulQ5_0x16L2,
    .decode_q5_1_x16_l2 = avx512::MatmulQ5_1x16L2,
    .decode_iq4_nl_x16_l2 = avx512::MatmulIq4Nlx16L2,
    .decode_mxfp4_x16_l2 = avx512::MatmulMxfp4x16L2,
    .decode_f32_x16_l2 = avx512::MatmulF32X16L2,
    .decode_f16_x16_l2 = avx512::MatmulF16X16L2,
    .decode_bf16_x16_l2 = avx512::MatmulBf16X16L2,
    .matmul_q4_1 = scalar::MatmulQ4_1,
    .matmul_q5_0 = scalar::MatmulQ5_0,
    .matmul_q5_1 = scalar::MatmulQ5_1,
    .matmul_iq4_nl = scalar::MatmulIq4Nl,
    .matmul_mxfp4 = scalar::MatmulMxfp4,
    .matmul_q2_k = avx512::MatmulQ2_K,
    .matmul_q3_k = avx512::MatmulQ3_K,
    .matmul_q4_k = avx512::MatmulQ4_K,
    .matmul_q5_k = avx512::MatmulQ5_K,
    .matmul_q6_k = avx512::MatmulQ6_K,
    .quantize_row_q8_0 = QuantizeRowQ8_0,
    .quantize_row_q8_1 = avx512::QuantizeRowQ8_1,
    .quantize_row_q8_k = avx512::QuantizeRowQ8_K,
    .dot_f32 = DotF32,
    .attend_head = avx512::AttendHead,
    .attend_group = avx512::AttendGroup,
    .gelu_f16_table = GeluF16Table,
    .swiglu = SwiGlu,
    .delta_rule_step = avx512::DeltaRule,
    .conv_rows = avx512::ShortConvRows,
    .mat_acc = avx512::MatAccumulate,
};

}  // namespace

const KernelTable* Avx512Kernels() { return &kAvx512; }

}  // namespace kvserve
