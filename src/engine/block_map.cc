#include "engine/block_map.h"

#include <algorithm>

namespace kvserve {

void BlockMap::AddOwner(BlockOwner owner, const BlockTable& table) {
  const int32_t index = static_cast<int32_t>(owners.size());
  owner.n_blocks = static_cast<int>(table.blocks.size());
  owners.push_back(std::move(owner));
  for (size_t l = 0; l < table.blocks.size(); ++l) {
    uses.push_back(
        BlockUse{.block = table.blocks[l], .owner = index, .logical = static_cast<int32_t>(l)});
  }
}

int BlockMap::UsesOf(int32_t block) const {
  return static_cast<int>(
      std::count_if(uses.begin(), uses.end(), [&](const BlockUse& u) { return u.block == block; }));
}

}  // namespace kvserve
