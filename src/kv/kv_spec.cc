#include "kv/kv_spec.h"

#include <algorithm>
#include <numeric>
#include <string>

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

uint64_t KvGroupSpec::BlockBytes(KvType type, int block_size) const {
  if (!kind->per_position()) return layers.size() * static_cast<uint64_t>(state_floats) * 4;
  return 2 * layers.size() * static_cast<uint64_t>(n_kv_heads) * KvHeadBytes(type, head_dim) *
         static_cast<uint64_t>(block_size);
}

uint64_t KvSpec::BytesPerToken(const KvFormat& format) const {
  uint64_t bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].kind->per_position()) bytes += groups[g].BlockBytes(format.group(g), 1);
  }
  return bytes;
}

bool KvSpec::has_recurrent_state() const {
  return std::any_of(groups.begin(), groups.end(),
                     [](const KvGroupSpec& g) { return !g.kind->per_position(); });
}

uint64_t KvSpec::BytesHeld(const KvFormat& format, int n_tokens, int block_size) const {
  uint64_t bytes = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    const KvGroupSpec& group = groups[g];
    bytes += group.BlockBytes(format.group(g), block_size) *
             group.BlocksPerSequence(n_tokens, block_size);
  }
  return bytes;
}

Status KvSpec::CheckFormat(const KvFormat& format) const {
  if (format.uniform() || format.per_group().size() == groups.size()) return Status::Ok();
  return Status::InvalidArgument(
      "KV type '" + format.Name() + "' names " + std::to_string(format.per_group().size()) +
      " types, but the model has " + std::to_string(groups.size()) + " KV layer group" +
      (groups.size() == 1 ? "" : "s") + " (give one type, or one per group)");
}

}  // namespace kvserve
