#include "kernels/attention.h"

#include <cmath>
#include <cstring>

#include "util/half.h"

namespace kvserve {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF32:
      return "f32";
    case KvType::kF16:
      return "f16";
    case KvType::kBF16:
      return "bf16";
  }
  return "?";
}

size_t KvTypeBytes(KvType type) { return type == KvType::kF32 ? 4 : 2; }

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

// A pointer to `n` floats of row data: the row itself for f32, else decoded into `tmp`.
const float* LoadRow(KvType type, const uint8_t* src, size_t n, float* tmp) {
  switch (type) {
    case KvType::kF32:
      return reinterpret_cast<const float*>(src);
    case KvType::kF16:
      for (size_t i = 0; i < n; ++i)
        tmp[i] = Fp16ToFloat(reinterpret_cast<const uint16_t*>(src)[i]);
      return tmp;
    case KvType::kBF16:
      for (size_t i = 0; i < n; ++i)
        tmp[i] = Bf16ToFloat(reinterpret_cast<const uint16_t*>(src)[i]);
      return tmp;
  }
  return tmp;
}

}  // namespace

void StoreKv(const KvLayerView& kv, int64_t slot, const float* k, const float* v) {
  const size_t n = kv.row_elements();
  const size_t row_bytes = n * KvTypeBytes(kv.type);
  StoreRow(kv.type, k, n, kv.k + slot * row_bytes);
  StoreRow(kv.type, v, n, kv.v + slot * row_bytes);
}

size_t AttentionScratchFloats(int n_keys, int head_dim) {
  return static_cast<size_t>(n_keys) + static_cast<size_t>(head_dim);
}

void AttendHead(const KernelTable& kernels, const KvLayerView& kv, const float* q, int kv_head,
                const int32_t* block_table, int n_keys, float scale, float* out, float* scratch) {
  const int head_dim = kv.head_dim;
  const size_t elem = KvTypeBytes(kv.type);
  const size_t slot_bytes = kv.row_elements() * elem;
  const size_t head_offset = static_cast<size_t>(kv_head) * head_dim * elem;
  float* scores = scratch;        // [n_keys]
  float* row = scratch + n_keys;  // [head_dim], a decoded K or V row
  auto row_at = [&](const uint8_t* pool, int position) {
    const int64_t slot =
        static_cast<int64_t>(block_table[position / kv.block_size]) * kv.block_size +
        position % kv.block_size;
    return LoadRow(kv.type, pool + slot * slot_bytes + head_offset, head_dim, row);
  };
  float max_score = -INFINITY;
  for (int j = 0; j < n_keys; ++j) {
    const float s = kernels.dot_f32(q, row_at(kv.k, j), head_dim) * scale;
    scores[j] = s;
    max_score = std::fmax(max_score, s);
  }
  double sum = 0.0;
  for (int j = 0; j < n_keys; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  std::memset(out, 0, sizeof(float) * head_dim);
  for (int j = 0; j < n_keys; ++j) {
    kernels.axpy_f32(scores[j] * inv_sum, row_at(kv.v, j), out, head_dim);
  }
}

}  // namespace kvserve
