#include "engine/context_shift.h"

#include <algorithm>
#include <cassert>

namespace kvserve {

int ContextShiftHead(int sink_tokens, int pinned_prefix_tokens, int block_size) {
  const int keep = std::max({sink_tokens, pinned_prefix_tokens, 0});
  return (keep + block_size - 1) / block_size * block_size;
}

Status CheckContextShiftHead(int n_head, int n_ctx, int block_size) {
  if (n_head + 2 * block_size <= n_ctx) return Status::Ok();
  return Status::InvalidArgument(
      "context_overflow shift keeps the first " + std::to_string(n_head) +
      " tokens (sink tokens and pinned prefix, rounded up to blocks of " +
      std::to_string(block_size) + ") and needs two more blocks of room, but the context holds " +
      std::to_string(n_ctx) + " tokens");
}

ContextShift PlanContextShift(int n_tokens, int n_ctx, int n_head, int block_size) {
  assert(n_tokens > n_ctx && n_head + 2 * block_size <= n_ctx);
  const int keep_after = (n_ctx - n_head) / 2;        // >= block_size
  const int excess = n_tokens - n_head - keep_after;  // >= 1
  const int n_drop = (excess + block_size - 1) / block_size * block_size;
  assert(n_tokens - n_head - n_drop >= 1);
  return ContextShift{.head = n_head, .n_drop = n_drop};
}

ContextShiftResult ApplyContextShift(Sequence& seq, const ContextShift& shift,
                                     BlockManager& blocks) {
  ContextShiftResult result{.n_dropped = shift.n_drop};
  const auto first = seq.tokens.begin() + shift.head;
  seq.dropped.insert(seq.dropped.end(), first, first + shift.n_drop);
  seq.tokens.erase(first, first + shift.n_drop);
  ++seq.n_shifts;
  seq.draft.clear();
  // The in-batch sharing keys named blocks of the prompt as it was; a shifted sequence offers none.
  seq.prompt_keys.clear();
  seq.prompt_keys_set = true;
  // The head's blocks hold the same tokens at the same positions: kept. The rest is released (its
  // keyed blocks stay in the prefix cache under the old chain, which they match).
  blocks.Truncate(seq.blocks, std::min<int>(shift.head, static_cast<int>(seq.tokens.size())));
  const bool head_computed = seq.n_computed >= shift.head && !seq.blocks.empty();
  seq.n_computed = std::min(seq.n_computed, shift.head);
  if (head_computed) {
    // Blocks already computed for the kept tokens' chain (the same prompt shifted before).
    seq.n_computed = blocks.ExtendPrefix(seq.blocks, seq.tokens, seq.request.cache_salt);
    result.n_from_cache = seq.n_computed - shift.head;
  }
  result.n_recompute = static_cast<int>(seq.tokens.size()) - seq.n_computed;
  return result;
}

}  // namespace kvserve
