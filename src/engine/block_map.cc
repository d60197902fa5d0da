#include "engine/block_map.h"

#include <algorithm>

namespace kvserve {

void BlockMap::AddOwner(BlockOwner owner, const BlockTable& table) {
  const int32_t index = static_cast<int32_t>(owners.size());
  owner.n_blocks = static_cast<int>(std::count_if(table.blocks.begin(), table.blocks.end(),
                                                  [](int32_t b) { return b != kNoBlock; }));
  owners.push_back(std::move(owner));
  for (size_t l = 0; l < table.blocks.size(); ++l) {
    if (table.blocks[l] == kNoBlock) continue;  // slid out of a window group's window
    uses.push_back(
        BlockUse{.block = table.blocks[l], .owner = index, .logical = static_cast<int32_t>(l)});
  }
}

int BlockMap::UsesOf(int32_t block) const {
  return static_cast<int>(
      std::count_if(uses.begin(), uses.end(), [&](const BlockUse& u) { return u.block == block; }));
}

}  // namespace kvserve
