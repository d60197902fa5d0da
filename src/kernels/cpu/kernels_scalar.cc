// The scalar reference twin of every kernel: plain loops in the obvious order. Fast ISAs are tested
// against these. Matmul inputs may be misaligned (GGUF rows, padded strides), so elements are read
// with memcpy, never through a typed pointer.
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/cpu/attend_head.h"
#include "kernels/cpu/blocks32_tiles.h"
#include "kernels/cpu/kernels.h"
#include "kernels/cpu/kquant_tiles.h"
#include "kernels/cpu/quant_tiles_scalar.h"
#include "kernels/cpu/recurrent_rows.h"
#include "kernels/quantize_ggml.h"
#include "util/half.h"

namespace kvserve {

void scalar::QuantizeRowQ8_1(const float* x, int k, BlockQ8_1* out) {
  ggml_encode::Q8_1(x, k, reinterpret_cast<uint8_t*>(out));
}

void scalar::QuantizeRowQ8_K(const float* x, int k, BlockQ8_K* out) {
  ggml_encode::Q8_K(x, k, reinterpret_cast<uint8_t*>(out));
}

namespace {

template <typename T>
T LoadAt(const uint8_t* p, int index) {
  T v;
  std::memcpy(&v, p + sizeof(T) * index, sizeof(T));
  return v;
}

template <typename Load>
void MatmulFloatRows(const MatmulTile& t, Load load) {
  for (int i = 0; i < t.m; ++i) {
    const uint8_t* x = t.x + i * t.x_row_bytes;
    for (int j = t.n_begin; j < t.n_end; ++j) {
      const uint8_t* w = t.w + j * t.w_row_bytes;
      float sum = 0.0f;
      for (int k = 0; k < t.k; ++k) sum += load(w, k) * LoadAt<float>(x, k);
      t.y[i * t.ldy + j] = sum;
    }
  }
}

void MatmulF32(const MatmulTile& t) {
  MatmulFloatRows(t, [](const uint8_t* w, int k) { return LoadAt<float>(w, k); });
}

void MatmulF16(const MatmulTile& t) {
  MatmulFloatRows(t, [](const uint8_t* w, int k) { return Fp16ToFloat(LoadAt<uint16_t>(w, k)); });
}

void MatmulBf16(const MatmulTile& t) {
  MatmulFloatRows(t, [](const uint8_t* w, int k) { return Bf16ToFloat(LoadAt<uint16_t>(w, k)); });
}

// Block-quantized weights against Q8_0 activations: an exact integer dot per block of 32, scaled
// by both block scales and summed in block order.
template <typename Block, typename BlockDot>
void MatmulBlocks(const MatmulTile& t, BlockDot block_dot) {
  const int n_blocks = t.k / 32;
  for (int i = 0; i < t.m; ++i) {
    const uint8_t* x = t.x + i * t.x_row_bytes;
    for (int j = t.n_begin; j < t.n_end; ++j) {
      const uint8_t* w = t.w + j * t.w_row_bytes;
      float sum = 0.0f;
      for (int b = 0; b < n_blocks; ++b) {
        const auto wb = LoadAt<Block>(w, b);
        const auto xb = LoadAt<BlockQ8_0>(x, b);
        const int isum = block_dot(wb, xb);
        sum += static_cast<float>(isum) * (Fp16ToFloat(wb.scale) * Fp16ToFloat(xb.scale));
      }
      t.y[i * t.ldy + j] = sum;
    }
  }
}

void MatmulQ8_0(const MatmulTile& t) {
  MatmulBlocks<BlockQ8_0>(t, [](const BlockQ8_0& w, const BlockQ8_0& x) {
    int isum = 0;
    for (int k = 0; k < 32; ++k) isum += w.quants[k] * x.quants[k];
    return isum;
  });
}

void MatmulQ4_0(const MatmulTile& t) {
  MatmulBlocks<BlockQ4_0>(t, [](const BlockQ4_0& w, const BlockQ8_0& x) {
    int isum = 0;
    for (int k = 0; k < 16; ++k) {
      const int lo = (w.quants[k] & 0x0f) - 8;
      const int hi = (w.quants[k] >> 4) - 8;
      isum += lo * x.quants[k] + hi * x.quants[k + 16];
    }
    return isum;
  });
}

void QuantizeRowQ8_0(const float* x, int k, BlockQ8_0* out) {
  for (int b = 0; b < k / 32; ++b) {
    const float* block = x + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(block[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToFp16(d);
    for (int j = 0; j < 32; ++j) {
      out[b].quants[j] = static_cast<int8_t>(std::nearbyint(block[j] * id));
    }
  }
}

float DotF32(const float* a, const float* b, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void GeluF16Table(const uint16_t* table, float* x, int n) {
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    if (v <= -10.0f) {
      x[i] = 0.0f;
    } else if (v < 10.0f) {
      x[i] = Fp16ToFloat(table[FloatToFp16(v)]);
    }
  }
}

void SwiGlu(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + scalar::KvExp(-g)) * up[i];
  }
}

constexpr KernelTable kScalar = {
    .isa = "scalar",
    .matmul_f32 = MatmulF32,
    .matmul_f16 = MatmulF16,
    .matmul_bf16 = MatmulBf16,
    .matmul_q8_0 = MatmulQ8_0,
    .matmul_q4_0 = MatmulQ4_0,
    .matmul_q8_0_x16 = nullptr,
    .matmul_q4_0_x16 = nullptr,
    .matmul_q4_k_x16 = nullptr,
    .matmul_q5_k_x16 = nullptr,
    .matmul_q6_k_x16 = nullptr,
    .matmul_q4_1_x16 = nullptr,
    .matmul_q5_0_x16 = nullptr,
    .matmul_q5_1_x16 = nullptr,
    .matmul_iq4_nl_x16 = nullptr,
    .matmul_mxfp4_x16 = nullptr,
    .matmul_q4_1 = scalar::MatmulQ4_1,
    .matmul_q5_0 = scalar::MatmulQ5_0,
    .matmul_q5_1 = scalar::MatmulQ5_1,
    .matmul_iq4_nl = scalar::MatmulIq4Nl,
    .matmul_mxfp4 = scalar::MatmulMxfp4,
    .matmul_q2_k = scalar::MatmulQ2_K,
    .matmul_q3_k = scalar::MatmulQ3_K,
    .matmul_q4_k = scalar::MatmulQ4_K,
    .matmul_q5_k = scalar::MatmulQ5_K,
    .matmul_q6_k = scalar::MatmulQ6_K,
    .quantize_row_q8_0 = QuantizeRowQ8_0,
    .quantize_row_q8_1 = scalar::QuantizeRowQ8_1,
    .quantize_row_q8_k = scalar::QuantizeRowQ8_K,
    .dot_f32 = DotF32,
    .attend_head = scalar::AttendHead,
    .attend_group = scalar::AttendGroup,
    .gelu_f16_table = GeluF16Table,
    .swiglu = SwiGlu,
    .delta_rule_step = scalar::DeltaRule,
    .conv_rows = scalar::ShortConvRows,
    .mat_acc = scalar::MatAccumulate,
};

}  // namespace

const KernelTable& ScalarKernels() { return kScalar; }

}  // namespace kvserve
