// The GGML tensor element types that can appear in a GGUF file, with their block layouts.
// kvserve computes with F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 and the
// K-quants Q2_K..Q6_K; the others are recognised so that `info` can describe a file and the loader
// can refuse it by name. Q8_1 and Q8_K are activation formats (what the Q4_1/Q5_1 and K-quant dot
// products multiply against), never weights.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string>

namespace kvserve {

enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ4_NL = 20,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name;
  uint32_t block_elements;  // elements per block (1 for plain types)
  uint32_t block_bytes;     // bytes per block
  bool supported;           // kvserve has kernels for it
};

// nullopt for a type id that GGML does not define (or that we do not know).
std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id);
GgmlTypeTraits TraitsOf(GgmlType type);
const char* GgmlTypeName(GgmlType type);
// Parses "f32", "F16", "q8_0", ... (case-insensitive); nullopt when unknown.
std::optional<GgmlType> ParseGgmlType(const std::string& name);

// Block layouts, exactly as GGML stores them. Scales named d (and mins dmin / m) are f16 unless
// noted; element j of a 32-block in a nibble type sits in the low nibble of byte j for j < 16 and
// in the high nibble of byte j - 16 otherwise.
constexpr int kQ8_0BlockSize = 32;
constexpr int kQ4_0BlockSize = 32;
constexpr int kQkBlockSize = 256;  // a K-quant super-block
struct BlockQ8_0 {
  uint16_t scale;  // f16
  int8_t quants[kQ8_0BlockSize];
};
struct BlockQ4_0 {
  uint16_t scale;                      // f16
  uint8_t quants[kQ4_0BlockSize / 2];  // element j in the low nibble of byte j, j+16 in the high
};
// x = d * q + m, q in [0, 15].
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t quants[16];
};
// x = d * (q - 16), q in [0, 31]: low 4 bits as Q4_0, bit 4 of element j is bit j of qh (LE).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t quants[16];
};
// x = d * q + m, q in [0, 31], bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t quants[16];
};
// x = d * kIq4NlValues[q], q a nibble laid out as Q4_0.
struct BlockIq4Nl {
  uint16_t d;
  uint8_t quants[16];
};
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// MXFP4 (OCP microscaling FP4, gpt-oss's expert weights): x = E8M0Half(e) * kMxfp4Values[q], q a
// nibble laid out as Q4_0. The table holds the E2M1 values doubled (0, ±0.5, ±1, ±1.5, ±2, ±3,
// ±4, ±6 times 2) and the scale is halved to match, as GGML stores and multiplies them.
struct BlockMxfp4 {
  uint8_t e;  // E8M0: a bare exponent, scale 2^(e - 127)
  uint8_t quants[16];
};
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
// Half the E8M0 scale, 2^(e - 128), exactly as GGML's GGML_E8M0_TO_FP32_HALF for every byte:
// e = 0 gives 2^-128 (f32 denormal 0x00200000), e = 1 gives 2^-127 (0x00400000), e >= 2 the
// normal float with exponent field e - 1; e = 255 gives 2^127 (not the OCP NaN: GGML does not
// treat it specially, and llama.cpp's quantizer never writes it).
inline float E8M0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? uint32_t{0x00200000} << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}
// Activations for Q4_1/Q5_1: Q8_0 plus s = f16(d * sum(quants)) with d in f32.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t quants[32];
};
// Q2_K: 16 sub-blocks of 16; x = d * (scales[i] & 15) * q - dmin * (scales[i] >> 4), q in [0, 3].
// Element e (sub-block e / 16) has q = (quants[32 * (e / 128) + e % 32] >> 2 * (e % 128 / 32)) & 3.
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t quants[64];
  uint16_t d;
  uint16_t dmin;
};
// Q3_K: 16 sub-blocks of 16, 6-bit signed scales (stored + 32; low 4 bits of scale i in scales[i]
// (i < 8) or scales[i - 8] >> 4, high 2 bits at bit 2 * (i / 4) of scales[8 + i % 4]);
// x = d * scale * (q - 4), q in [0, 7]: the low 2 bits as Q2_K, bit 2 is bit 4 * (e / 128) +
// e % 128 / 32 of hmask[e % 32].
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t quants[64];
  uint8_t scales[12];
  uint16_t d;
};
// Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes (for i < 4:
// scale = scales[i] & 63, min = scales[i + 4] & 63; else scale = (scales[i + 4] & 15) |
// (scales[i - 4] >> 6) << 4, min = (scales[i + 4] >> 4) | (scales[i] >> 6) << 4);
// x = d * scale * q - dmin * min. Sub-block 2c is the low nibbles of quants[32c .. 32c + 32),
// 2c + 1 the high nibbles; Q5_K's bit 4 of element l of sub-block s is bit s of qh[l].
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t quants[128];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t quants[128];
};
// Q6_K: 16 sub-blocks of 16 with int8 scales; x = d * scales[e / 16] * (q - 32), q in [0, 63].
// For e = 128n + 32j + l: the low 4 bits are ql[64n + l + 32 (j & 1)] >> 4 (j / 2), the high 2
// bits (qh[32n + l] >> 2j) & 3.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
// Activations for the K-quants: d in f32, bsums[i] = sum of quants[16i .. 16i + 16).
struct BlockQ8_K {
  float d;
  int8_t quants[256];
  int16_t bsums[16];
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace kvserve
