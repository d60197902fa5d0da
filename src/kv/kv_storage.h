// The memory behind the KV cache: per layer, a K pool and a V pool of n_blocks blocks of
// block_size token slots each. Owns the bytes; hands the model borrowed per-layer views.
// Which sequence owns which block is decided elsewhere (BlockManager); this class never looks.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kernels/cpu/attention.h"
#include "model/model_config.h"

namespace kvserve {

class KvStorage {
 public:
  KvStorage(const ModelConfig& config, KvType type, int block_size, int n_blocks);
  KvStorage(const KvStorage&) = delete;
  KvStorage& operator=(const KvStorage&) = delete;

  std::span<const KvLayerView> views() const { return views_; }
  KvType type() const { return type_; }
  int block_size() const { return block_size_; }
  int n_blocks() const { return n_blocks_; }
  uint64_t bytes() const { return bytes_; }
  // Bytes of K+V for one block across all layers.
  static uint64_t BytesPerBlock(const ModelConfig& config, KvType type, int block_size);

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  KvType type_;
  int block_size_;
  int n_blocks_;
  uint64_t bytes_ = 0;
  std::unique_ptr<uint8_t, FreeDeleter> memory_;  // 64-byte aligned; K and V of every layer
  std::vector<KvLayerView> views_;
};

}  // namespace kvserve
