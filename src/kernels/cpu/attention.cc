#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstring>

#include "util/half.h"

namespace kvserve {

namespace {

void StoreRow(const KvLayerView& kv, const float* src, uint8_t* dst) {
  const size_t n = kv.row_elements();
  switch (kv.type) {
    case KvType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      break;
    case KvType::kF16:
      for (size_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(dst)[i] = FloatToFp16(src[i]);
      break;
    case KvType::kBF16:
      for (size_t i = 0; i < n; ++i) reinterpret_cast<uint16_t*>(dst)[i] = FloatToBf16(src[i]);
      break;
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      // Each head row is quantized alone (its groups never span two heads).
      for (int h = 0; h < kv.n_kv_heads; ++h) {
        EncodeKvHead(kv.type, src + static_cast<size_t>(h) * kv.head_dim, kv.head_dim,
                     dst + h * kv.head_bytes());
      }
      break;
  }
}

}  // namespace

void StoreKv(const KvLayerView& kv, int64_t slot, const float* k, const float* v) {
  const size_t row_bytes = kv.slot_bytes();
  StoreRow(kv, k, kv.k + slot * row_bytes);
  StoreRow(kv, v, kv.v + slot * row_bytes);
}

size_t AttentionScratchFloats(int n_keys, int /*head_dim*/) {
  return (static_cast<size_t>(n_keys) + 15) / 16 * 16;
}

AttendJob AttentionJob(const KvLayerView& kv, const float* q, int kv_head,
                       const int32_t* block_table, int n_keys, float scale, float* out,
                       float* scratch, const AttendLimits& limits) {
  const size_t head_offset = static_cast<size_t>(kv_head) * kv.head_bytes();
  return AttendJob{
      .q = q,
      .k = kv.k + head_offset,
      .v = kv.v + head_offset,
      .slot_bytes = kv.slot_bytes(),
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
      .sink = limits.sink,
      .bias = limits.bias,
  };
}

}  // namespace kvserve
