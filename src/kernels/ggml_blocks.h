// Unpacking of the GGML block types that are not plain "scale times int8" (Q4_1, Q5_0, Q5_1,
// IQ4_NL, MXFP4 and the K-quants) into small integers plus their scales, the form both the decoders
// (quantize.cc) and the scalar matmul tiles (cpu/quant_tiles_scalar.cc) compute from. The bit
// layouts are documented with the block structs in io/ggml_type.h. Blocks may be misaligned in
// the file: they are read with memcpy.
#pragma once

#include <cstdint>
#include <cstring>

#include "io/ggml_type.h"
#include "util/half.h"

namespace kvserve {

// A block of 32: x[e] = d * q[e] + m (m is 0 for the symmetric types).
struct Unpacked32 {
  float d;
  float m;
  int8_t q[32];
};

// A K-quant super-block of 256 in sub-blocks of `sub` (16 or 32) elements:
// x[e] = (d * scales[s]) * q[e] - (dmin * mins[s]), s = e / sub (mins all 0 without dmin).
struct UnpackedK {
  float d;
  float dmin;
  int sub;
  bool has_mins;
  int8_t q[256];
  int8_t scales[16];
  int8_t mins[16];
};

template <typename Block>
Block LoadBlock(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

// The 4-bit nibble of element j (0..31) of a 16-byte nibble array laid out as Q4_0.
inline int Nibble(const uint8_t* quants, int j) {
  return j < 16 ? quants[j] & 0x0f : quants[j - 16] >> 4;
}

inline uint32_t HighBits32(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  return h;  // little-endian hosts only (as GGUF itself)
}

inline void UnpackQ4_1(const uint8_t* p, Unpacked32& u) {
  const auto b = LoadBlock<BlockQ4_1>(p);
  u.d = Fp16ToFloat(b.d);
  u.m = Fp16ToFloat(b.m);
  for (int j = 0; j < 32; ++j) u.q[j] = static_cast<int8_t>(Nibble(b.quants, j));
}

inline void UnpackQ5_0(const uint8_t* p, Unpacked32& u) {
  const auto b = LoadBlock<BlockQ5_0>(p);
  const uint32_t h = HighBits32(b.qh);
  u.d = Fp16ToFloat(b.d);
  u.m = 0.0f;
  for (int j = 0; j < 32; ++j) {
    u.q[j] = static_cast<int8_t>((Nibble(b.quants, j) | ((h >> j) & 1u) << 4) - 16);
  }
}

inline void UnpackQ5_1(const uint8_t* p, Unpacked32& u) {
  const auto b = LoadBlock<BlockQ5_1>(p);
  const uint32_t h = HighBits32(b.qh);
  u.d = Fp16ToFloat(b.d);
  u.m = Fp16ToFloat(b.m);
  for (int j = 0; j < 32; ++j) {
    u.q[j] = static_cast<int8_t>(Nibble(b.quants, j) | ((h >> j) & 1u) << 4);
  }
}

inline void UnpackIq4Nl(const uint8_t* p, Unpacked32& u) {
  const auto b = LoadBlock<BlockIq4Nl>(p);
  u.d = Fp16ToFloat(b.d);
  u.m = 0.0f;
  for (int j = 0; j < 32; ++j) u.q[j] = kIq4NlValues[Nibble(b.quants, j)];
}

// d = 2^(e - 128) and q the doubled E2M1 values (-12 .. 12): d * q is exact, as GGML's decoder.
inline void UnpackMxfp4(const uint8_t* p, Unpacked32& u) {
  const auto b = LoadBlock<BlockMxfp4>(p);
  u.d = E8M0Half(b.e);
  u.m = 0.0f;
  for (int j = 0; j < 32; ++j) u.q[j] = kMxfp4Values[Nibble(b.quants, j)];
}

inline void UnpackQ2_K(const uint8_t* p, UnpackedK& u) {
  const auto b = LoadBlock<BlockQ2_K>(p);
  u.d = Fp16ToFloat(b.d);
  u.dmin = Fp16ToFloat(b.dmin);
  u.sub = 16;
  u.has_mins = true;
  for (int s = 0; s < 16; ++s) {
    u.scales[s] = static_cast<int8_t>(b.scales[s] & 0x0f);
    u.mins[s] = static_cast<int8_t>(b.scales[s] >> 4);
  }
  for (int e = 0; e < 256; ++e) {
    const int shift = 2 * (e % 128 / 32);
    u.q[e] = static_cast<int8_t>((b.quants[32 * (e / 128) + e % 32] >> shift) & 3);
  }
}

// The signed 6-bit scale (-32 .. 31) of sub-block s (0..15) of a Q3_K block.
inline int ScaleQ3_K(const uint8_t scales[12], int s) {
  const int low = s < 8 ? scales[s] & 0x0f : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | high << 4) - 32;
}

inline void UnpackQ3_K(const uint8_t* p, UnpackedK& u) {
  const auto b = LoadBlock<BlockQ3_K>(p);
  u.d = Fp16ToFloat(b.d);
  u.dmin = 0.0f;
  u.sub = 16;
  u.has_mins = false;
  for (int s = 0; s < 16; ++s) {
    u.scales[s] = static_cast<int8_t>(ScaleQ3_K(b.scales, s));
    u.mins[s] = 0;
  }
  for (int e = 0; e < 256; ++e) {
    const int shift = 2 * (e % 128 / 32);
    const int low = (b.quants[32 * (e / 128) + e % 32] >> shift) & 3;
    const int hbit = (b.hmask[e % 32] >> (4 * (e / 128) + e % 128 / 32)) & 1;
    u.q[e] = static_cast<int8_t>(low - (hbit != 0 ? 0 : 4));
  }
}

// The 6-bit scale and min of sub-block s (0..7) of a Q4_K/Q5_K block.
inline void ScaleMinK4(const uint8_t scales[12], int s, int8_t* scale, int8_t* min) {
  if (s < 4) {
    *scale = static_cast<int8_t>(scales[s] & 63);
    *min = static_cast<int8_t>(scales[s + 4] & 63);
  } else {
    *scale = static_cast<int8_t>((scales[s + 4] & 0x0f) | (scales[s - 4] >> 6) << 4);
    *min = static_cast<int8_t>((scales[s + 4] >> 4) | (scales[s] >> 6) << 4);
  }
}

inline void UnpackQ4_K(const uint8_t* p, UnpackedK& u) {
  const auto b = LoadBlock<BlockQ4_K>(p);
  u.d = Fp16ToFloat(b.d);
  u.dmin = Fp16ToFloat(b.dmin);
  u.sub = 32;
  u.has_mins = true;
  for (int s = 0; s < 8; ++s) ScaleMinK4(b.scales, s, &u.scales[s], &u.mins[s]);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const uint8_t byte = b.quants[32 * (s / 2) + e % 32];
    u.q[e] = static_cast<int8_t>(s % 2 == 0 ? byte & 0x0f : byte >> 4);
  }
}

inline void UnpackQ5_K(const uint8_t* p, UnpackedK& u) {
  const auto b = LoadBlock<BlockQ5_K>(p);
  u.d = Fp16ToFloat(b.d);
  u.dmin = Fp16ToFloat(b.dmin);
  u.sub = 32;
  u.has_mins = true;
  for (int s = 0; s < 8; ++s) ScaleMinK4(b.scales, s, &u.scales[s], &u.mins[s]);
  for (int e = 0; e < 256; ++e) {
    const int s = e / 32;
    const uint8_t byte = b.quants[32 * (s / 2) + e % 32];
    const int low = s % 2 == 0 ? byte & 0x0f : byte >> 4;
    const int high = (b.qh[e % 32] >> s) & 1;
    u.q[e] = static_cast<int8_t>(low | high << 4);
  }
}

inline void UnpackQ6_K(const uint8_t* p, UnpackedK& u) {
  const auto b = LoadBlock<BlockQ6_K>(p);
  u.d = Fp16ToFloat(b.d);
  u.dmin = 0.0f;
  u.sub = 16;
  u.has_mins = false;
  for (int s = 0; s < 16; ++s) {
    u.scales[s] = b.scales[s];
    u.mins[s] = 0;
  }
  for (int e = 0; e < 256; ++e) {
    const int n = e / 128, j = e % 128 / 32, l = e % 32;
    const int low = (b.ql[64 * n + l + 32 * (j & 1)] >> (4 * (j / 2))) & 0x0f;
    const int high = (b.qh[32 * n + l] >> (2 * j)) & 3;
    u.q[e] = static_cast<int8_t>((low | high << 4) - 32);
  }
}

// The unpacker of a 32-block type / a K-quant type; nullptr for other types.
using Unpack32Fn = void (*)(const uint8_t*, Unpacked32&);
using UnpackKFn = void (*)(const uint8_t*, UnpackedK&);

inline Unpack32Fn Unpack32For(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1:
      return UnpackQ4_1;
    case GgmlType::kQ5_0:
      return UnpackQ5_0;
    case GgmlType::kQ5_1:
      return UnpackQ5_1;
    case GgmlType::kIQ4_NL:
      return UnpackIq4Nl;
    case GgmlType::kMXFP4:
      return UnpackMxfp4;
    default:
      return nullptr;
  }
}

inline UnpackKFn UnpackKFor(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K:
      return UnpackQ2_K;
    case GgmlType::kQ3_K:
      return UnpackQ3_K;
    case GgmlType::kQ4_K:
      return UnpackQ4_K;
    case GgmlType::kQ5_K:
      return UnpackQ5_K;
    case GgmlType::kQ6_K:
      return UnpackQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace kvserve
