#include "kernels/quantize.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>

#include "kernels/ggml_blocks.h"
#include "kernels/quantize_ggml.h"
#include "util/half.h"

namespace kvserve {

size_t RowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits traits = TraitsOf(type);
  return static_cast<size_t>(n / traits.block_elements) * traits.block_bytes;
}

namespace {

// float -> integer in [lo, hi] without undefined behaviour: NaN becomes 0, out-of-range values
// clamp (only non-finite or denormal-scaled blocks can produce them).
int ClampToInt(float v, int lo, int hi) {
  if (!(v == v)) return 0;
  if (v <= static_cast<float>(lo)) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

void QuantizeQ8_0(const float* x, int64_t n, BlockQ8_0* out) {
  for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
    const float* block = x + b * kQ8_0BlockSize;
    float amax = 0.0f;
    for (int j = 0; j < kQ8_0BlockSize; ++j) amax = std::fmax(amax, std::fabs(block[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToFp16(d);
    for (int j = 0; j < kQ8_0BlockSize; ++j) {
      out[b].quants[j] = static_cast<int8_t>(ClampToInt(std::round(block[j] * id), -127, 127));
    }
  }
}

void QuantizeQ4_0(const float* x, int64_t n, BlockQ4_0* out) {
  for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
    const float* block = x + b * kQ4_0BlockSize;
    // The element of largest magnitude, with its sign, maps to -8.
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQ4_0BlockSize; ++j) {
      if (std::fabs(block[j]) > amax) {
        amax = std::fabs(block[j]);
        max = block[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].scale = FloatToFp16(d);
    for (int j = 0; j < kQ4_0BlockSize / 2; ++j) {
      const int lo = ClampToInt(block[j] * id + 8.5f, 0, 15);
      const int hi = ClampToInt(block[j + 16] * id + 8.5f, 0, 15);
      out[b].quants[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

}  // namespace

void QuantizeRow(GgmlType type, const float* x, int64_t n, uint8_t* out) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, x, sizeof(float) * n);
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = FloatToFp16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = FloatToBf16(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      break;
    case GgmlType::kQ8_0:
      QuantizeQ8_0(x, n, reinterpret_cast<BlockQ8_0*>(out));
      break;
    case GgmlType::kQ4_0:
      QuantizeQ4_0(x, n, reinterpret_cast<BlockQ4_0*>(out));
      break;
    case GgmlType::kQ4_1:
      ggml_encode::Q4_1(x, n, out);
      break;
    case GgmlType::kQ5_0:
      ggml_encode::Q5_0(x, n, out);
      break;
    case GgmlType::kQ5_1:
      ggml_encode::Q5_1(x, n, out);
      break;
    case GgmlType::kIQ4_NL:
      ggml_encode::Iq4Nl(x, n, out);
      break;
    case GgmlType::kMXFP4:
      ggml_encode::Mxfp4(x, n, out);
      break;
    case GgmlType::kQ2_K:
      ggml_encode::Q2_K(x, n, out);
      break;
    case GgmlType::kQ3_K:
      ggml_encode::Q3_K(x, n, out);
      break;
    case GgmlType::kQ4_K:
      ggml_encode::Q4_K(x, n, out);
      break;
    case GgmlType::kQ5_K:
      ggml_encode::Q5_K(x, n, out);
      break;
    case GgmlType::kQ6_K:
      ggml_encode::Q6_K(x, n, out);
      break;
    case GgmlType::kQ8_1:
      ggml_encode::Q8_1(x, n, out);
      break;
    case GgmlType::kQ8_K:
      ggml_encode::Q8_K(x, n, out);
      break;
    default:
      assert(false && "QuantizeRow: unsupported type");
  }
}

void DequantizeRow(GgmlType type, const uint8_t* data, int64_t n, float* out) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, data, sizeof(float) * n);
      break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = Fp16ToFloat(h);
      }
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = Bf16ToFloat(h);
      }
      break;
    case GgmlType::kQ8_0: {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(data);
      for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float d = Fp16ToFloat(blocks[b].scale);
        for (int j = 0; j < kQ8_0BlockSize; ++j) out[b * 32 + j] = d * blocks[b].quants[j];
      }
      break;
    }
    case GgmlType::kQ4_0: {
      const auto* blocks = reinterpret_cast<const BlockQ4_0*>(data);
      for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
        const float d = Fp16ToFloat(blocks[b].scale);
        for (int j = 0; j < 16; ++j) {
          out[b * 32 + j] = d * ((blocks[b].quants[j] & 0x0f) - 8);
          out[b * 32 + j + 16] = d * ((blocks[b].quants[j] >> 4) - 8);
        }
      }
      break;
    }
    case GgmlType::kQ8_1:
      for (int64_t b = 0; b < n / 32; ++b) {
        const auto block = LoadBlock<BlockQ8_1>(data + b * sizeof(BlockQ8_1));
        const float d = Fp16ToFloat(block.d);
        for (int j = 0; j < 32; ++j) out[b * 32 + j] = d * block.quants[j];
      }
      break;
    case GgmlType::kQ8_K:
      for (int64_t b = 0; b < n / 256; ++b) {
        const auto block = LoadBlock<BlockQ8_K>(data + b * sizeof(BlockQ8_K));
        for (int j = 0; j < 256; ++j) out[b * 256 + j] = block.d * block.quants[j];
      }
      break;
    default:
      if (const Unpack32Fn unpack = Unpack32For(type)) {
        const size_t block_bytes = TraitsOf(type).block_bytes;
        Unpacked32 u;
        for (int64_t b = 0; b < n / 32; ++b) {
          unpack(data + b * block_bytes, u);
          for (int j = 0; j < 32; ++j) out[b * 32 + j] = u.d * u.q[j] + u.m;
        }
      } else if (const UnpackKFn unpack_k = UnpackKFor(type)) {
        const size_t block_bytes = TraitsOf(type).block_bytes;
        UnpackedK u;
        for (int64_t b = 0; b < n / 256; ++b) {
          unpack_k(data + b * block_bytes, u);
          for (int e = 0; e < 256; ++e) {
            const int s = e / u.sub;
            out[b * 256 + e] = (u.d * u.scales[s]) * u.q[e] - u.dmin * u.mins[s];
          }
        }
      } else {
        assert(false && "DequantizeRow: unsupported type");
      }
  }
}

}  // namespace kvserve
