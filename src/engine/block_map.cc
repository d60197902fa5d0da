#include "engine/block_map.h"

#include <algorithm>

namespace kvserve {

void BlockMap::AddOwner(BlockOwner owner, const BlockTable& table) {
  const int32_t index = static_cast<int32_t>(owners.size());
  const std::vector<int32_t> none;
  const std::vector<int32_t>& row = table.groups.empty() ? none : table.group(0);
  owner.n_blocks = static_cast<int>(
      std::count_if(row.begin(), row.end(), [](int32_t b) { return b != kNoBlock; }));
  owners.push_back(std::move(owner));
  for (size_t l = 0; l < row.size(); ++l) {
    if (row[l] == kNoBlock) continue;  // released by its group's kind
    uses.push_back(BlockUse{.block = row[l], .owner = index, .logical = static_cast<int32_t>(l)});
  }
}

int BlockMap::UsesOf(int32_t block) const {
  return static_cast<int>(
      std::count_if(uses.begin(), uses.end(), [&](const BlockUse& u) { return u.block == block; }));
}

}  // namespace kvserve
