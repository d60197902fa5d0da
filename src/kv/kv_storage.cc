#include "kv/kv_storage.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace kvserve {

void KvStorage::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

uint64_t KvStorage::BytesPerBlock(const ModelConfig& config, KvType type, int block_size) {
  return config.KvBytesPerToken(KvTypeBytes(type)) * static_cast<uint64_t>(block_size);
}

KvStorage::KvStorage(const ModelConfig& config, KvType type, int block_size, int n_blocks)
    : type_(type), block_size_(block_size), n_blocks_(n_blocks) {
  const uint64_t row_bytes =
      static_cast<uint64_t>(config.n_kv_heads) * config.head_dim * KvTypeBytes(type);
  const uint64_t pool_bytes = (row_bytes * block_size * n_blocks + 63) / 64 * 64;
  bytes_ = pool_bytes * 2 * config.n_layers;
  void* memory = std::aligned_alloc(64, bytes_ == 0 ? 64 : bytes_);
  if (memory == nullptr) throw std::bad_alloc();
  // Zeroed so that a slot read before it is written (a bug) gives zeros, not stale data.
  std::memset(memory, 0, bytes_);
  memory_.reset(static_cast<uint8_t*>(memory));
  views_.resize(config.n_layers);
  for (int layer = 0; layer < config.n_layers; ++layer) {
    KvLayerView& view = views_[layer];
    view.k = memory_.get() + pool_bytes * (2 * layer);
    view.v = memory_.get() + pool_bytes * (2 * layer + 1);
    view.type = type;
    view.block_size = block_size;
    view.n_kv_heads = config.n_kv_heads;
    view.head_dim = config.head_dim;
  }
}

}  // namespace kvserve
