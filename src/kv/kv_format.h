// Element formats of the KV cache. A layer group's K and V rows are stored in one of these; the
// attention kernels read them directly and a token's K/V is rounded to it exactly once.
//
// A token's K (or V) row of one layer is n_kv_heads head rows side by side, each KvHeadBytes apart.
// f32, f16 and bf16 store head_dim elements of 4, 2 and 2 bytes. The quantized types split a head
// row into groups of kKvQuantGroup elements (the last one shorter when head_dim is not a multiple)
// and store, per head: the codes of every element in order, then one f16 scale per group:
//   q8_0: code c = int8, element = scale * c;              head_dim bytes of codes
//   q4_0: code c = 4 bits, element = scale * (c - 8);      (head_dim + 1) / 2 bytes of codes,
//         element 2i in the low nibble of byte i, element 2i + 1 in the high one
// so dequantizing is exact in float (an 11-bit scale times a code of at most 8 bits) and every
// kernel table computes the same dequantized values. q4_0 is lossy: ~1/16 of a group's largest
// magnitude per element (docs/kv-cache.md has the measured cost).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace kvserve {

enum class KvType : uint8_t { kF32, kF16, kBF16, kQ8_0, kQ4_0 };
inline constexpr KvType kAllKvTypes[] = {KvType::kF32, KvType::kF16, KvType::kBF16, KvType::kQ8_0,
                                         KvType::kQ4_0};

// Elements sharing one scale in the quantized types.
inline constexpr int kKvQuantGroup = 32;

const char* KvTypeName(KvType type);
bool KvTypeIsQuantized(KvType type);
// Bytes of one head row of head_dim elements (the layout above).
size_t KvHeadBytes(KvType type, int head_dim);
// Quantized types: bytes of the codes at the start of a head row; the scales follow.
size_t KvCodeBytes(KvType type, int head_dim);
// "f32", "f16", "bf16", "q8_0" or "q4_0"; an error names the value and the choices.
Result<KvType> ParseKvType(const std::string& name);

// One head row: x[head_dim] floats to `type` (rounded to nearest; for the quantized types the
// scale of a group is its largest magnitude / 127 (q8_0), or its value of largest magnitude / -8
// (q4_0), as GGML's reference quantizers), and back (exact). NaN codes as 0.
void EncodeKvHead(KvType type, const float* x, int head_dim, uint8_t* dst);
void DecodeKvHead(KvType type, const uint8_t* src, int head_dim, float* out);

// The KV type of each layer group of a KvSpec: one for every group, or one per group in the
// spec's order (KvSpec::CheckFormat says whether it fits a spec). Converts from a KvType.
class KvFormat {
 public:
  KvFormat(KvType all = KvType::kF32) : all_(all) {}  // NOLINT: a type is a uniform format
  static KvFormat PerGroup(std::vector<KvType> types);
  // "q8_0" (every group) or "f16,q8_0" (one per group); an error names the bad part.
  static Result<KvFormat> Parse(const std::string& text);

  // The type of group `index` (below the group count when per group).
  KvType group(size_t index) const {
    assert(per_group_.empty() || index < per_group_.size());
    return per_group_.empty() ? all_ : per_group_[index];
  }
  bool uniform() const { return per_group_.empty(); }
  std::span<const KvType> per_group() const { return per_group_; }
  // The inverse of Parse.
  std::string Name() const;
  bool operator==(const KvFormat& other) const { return Name() == other.Name(); }

 private:
  KvType all_;
  std::vector<KvType> per_group_;  // empty: all_ everywhere
};

}  // namespace kvserve
