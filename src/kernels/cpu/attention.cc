#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "util/half.h"

namespace kvserve {

namespace {

void StoreRow(KvType type, const float* src, size_t n, uint8_t* dst) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      break;
    case KvType::kF16:
      for (size_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(dst)[i] = FloatToFp16(src[i]);
      break;
    case KvType::kBF16:
      for (size_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(dst)[i] = FloatToBf16(src[i]);
      break;
  }
}

}  // namespace

void StoreKv(const KvLayerView& kv, int64_t slot, const float* k, const float* v) {
  const size_t n = kv.row_elements();
  const size_t row_bytes = n * KvTypeBytes(kv.type);
  StoreRow(kv.type, k, n, kv.k + slot * row_bytes);
  StoreRow(kv.type, v, n, kv.v + slot * row_bytes);
}

size_t AttentionScratchFloats(int n_keys, int /*head_dim*/) {
  return (static_cast<size_t>(n_keys) + 15) / 16 * 16;
}

void AttendHead(const KernelTable& kernels, const KvLayerView& kv, const float* q, int kv_head,
                const int32_t* block_table, int n_keys, float scale, float* out, float* scratch,
                const AttendLimits& limits) {
  const size_t elem = KvTypeBytes(kv.type);
  const size_t head_offset = static_cast<size_t>(kv_head) * kv.head_dim * elem;
  kernels.attend_head(AttendJob{
      .q = q,
      .k = kv.k + head_offset,
      .v = kv.v + head_offset,
      .slot_bytes = kv.row_elements() * elem,
      .type = kv.type,
      .block_table = block_table,
      .block_size = kv.block_size,
      .n_keys = n_keys,
      .head_dim = kv.head_dim,
      .scale = scale,
      .scores = scratch,
      .out = out,
      .first_key = limits.first_key,
      .soft_cap = limits.soft_cap,
  });
}

}  // namespace kvserve
