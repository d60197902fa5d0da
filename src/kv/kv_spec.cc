#include "kv/kv_spec.h"

#include <numeric>

namespace kvserve {

KvSpec KvSpec::Uniform(int n_layers, int n_kv_heads, int head_dim) {
  KvGroupSpec group;
  group.layers.resize(n_layers);
  std::iota(group.layers.begin(), group.layers.end(), 0);
  group.n_kv_heads = n_kv_heads;
  group.head_dim = head_dim;
  return KvSpec{.groups = {group}};
}

int KvSpec::n_layers() const {
  int n = 0;
  for (const KvGroupSpec& group : groups) n += static_cast<int>(group.layers.size());
  return n;
}

uint64_t KvSpec::BytesPerToken(KvType type) const {
  uint64_t bytes = 0;
  for (const KvGroupSpec& group : groups) {
    bytes +=
        2 * group.layers.size() * static_cast<uint64_t>(group.row_elements()) * KvTypeBytes(type);
  }
  return bytes;
}

}  // namespace kvserve
