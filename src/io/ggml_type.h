// The GGML tensor element types that can appear in a GGUF file, with their block layouts.
// kvserve computes with F32, F16, BF16, Q8_0 and Q4_0; the others are recognised so that `info`
// can describe a file and the loader can refuse it by name.
#pragma once

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
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
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

// Block layouts, exactly as GGML stores them.
constexpr int kQ8_0BlockSize = 32;
constexpr int kQ4_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t scale;  // f16
  int8_t quants[kQ8_0BlockSize];
};
struct BlockQ4_0 {
  uint16_t scale;                      // f16
  uint8_t quants[kQ4_0BlockSize / 2];  // element j in the low nibble of byte j, j+16 in the high
};
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);

}  // namespace kvserve
