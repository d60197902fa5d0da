#include "grammar/token_masker.h"

#include <algorithm>

namespace kvserve {

void TokenMasker::Walk(const GrammarState& start, bool isolated, TokenMask& accepted,
                       std::vector<int32_t>* uncertain) const {
  const std::vector<int32_t>& order = vocab_->order();
  const std::vector<uint32_t>& shared = vocab_->shared();
  // states[d]: after the first d bytes of the current token; escaped[d]: on the way there a
  // state held an empty stack (isolated: the position's rule had ended) and bytes went on.
  std::vector<GrammarState> states(1, start);
  std::vector<char> escaped(1, 0);
  size_t valid = 0;  // states[0..valid] hold the current token's prefix
  for (size_t i = 0; i < order.size();) {
    const std::string_view bytes = vocab_->sorted_piece(i);
    if (states.size() < bytes.size() + 1) {
      states.resize(bytes.size() + 1);
      escaped.resize(bytes.size() + 1);
    }
    size_t d = std::min<size_t>(shared[i], valid);
    bool dead = false;
    while (d < bytes.size()) {
      const bool ran_past = isolated && (states[d].has_empty_stack() || states[d].overflowed);
      escaped[d + 1] = escaped[d] || ran_past;
      StepByte(*grammar_, states[d], static_cast<uint8_t>(bytes[d]), states[d + 1]);
      ++d;
      if (states[d].stacks.empty()) {
        dead = true;
        break;
      }
    }
    valid = d;
    if (!dead) {
      accepted.Set(order[i]);
      ++i;
      continue;
    }
    // Every token that shares the dead prefix bytes[0, d) is decided with it.
    const bool undecided = isolated && (escaped[d] || states[d].overflowed);
    do {
      if (undecided) uncertain->push_back(order[i]);
      ++i;
    } while (i < order.size() && shared[i] >= d);
  }
}

bool TokenMasker::AcceptsBytes(const GrammarState& start, std::string_view bytes) const {
  GrammarState a = start, b;
  for (char c : bytes) {
    StepByte(*grammar_, a, static_cast<uint8_t>(c), b);
    if (b.stacks.empty()) return false;
    std::swap(a, b);
  }
  return true;
}

size_t TokenMasker::KeyHash::operator()(const GrammarStack& key) const {
  size_t h = key.size();
  for (const GrammarElement* e : key) {
    h ^= std::hash<const void*>()(e) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  }
  return h;
}

const TokenMasker::PositionMasks* TokenMasker::ForTop(const GrammarStack& stack) {
  const size_t depth = std::min(stack.size(), kKeyDepth);
  const bool whole = depth == stack.size();
  // A whole stack's key starts with a null entry: its walk knows the real bottom, so its masks
  // must not serve a deeper stack with the same top.
  GrammarStack key;
  if (whole) key.push_back(nullptr);
  key.insert(key.end(), stack.end() - static_cast<std::ptrdiff_t>(depth), stack.end());
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.get();
  const size_t bytes = (static_cast<size_t>(vocab_->n_vocab()) + 7) / 8;
  if (cache_bytes_ + bytes > kMaxCacheBytes) return nullptr;
  auto masks = std::make_unique<PositionMasks>();
  masks->accepted.Reset(vocab_->n_vocab());
  GrammarState start;
  start.stacks.emplace_back(key.begin() + (whole ? 1 : 0), key.end());
  Walk(start, /*isolated=*/!whole, masks->accepted, &masks->uncertain);
  cache_bytes_ += bytes + masks->uncertain.size() * sizeof(int32_t);
  return cache_.emplace(std::move(key), std::move(masks)).first->second.get();
}

size_t TokenMasker::cached_positions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

void TokenMasker::FillMask(const GrammarMatcher& matcher, TokenMask& mask) {
  mask.Reset(vocab_->n_vocab());
  const GrammarState& state = matcher.state();
  if (state.overflowed) return;
  if (state.partial.n_remaining > 0) {
    Walk(state, /*isolated=*/false, mask, nullptr);
    return;
  }
  GrammarState single;
  for (const GrammarStack& stack : state.stacks) {
    if (stack.empty()) {
      for (int32_t id : vocab_->end_tokens()) mask.Set(id);
      continue;
    }
    single.stacks.assign(1, stack);
    const PositionMasks* masks = ForTop(stack);
    if (masks == nullptr) {
      Walk(single, /*isolated=*/false, mask, nullptr);
      continue;
    }
    mask.Add(masks->accepted);
    for (int32_t id : masks->uncertain) {
      if (!mask.Test(id) && AcceptsBytes(single, vocab_->piece(id))) mask.Set(id);
    }
  }
}

bool TokenMasker::Allows(const GrammarMatcher& matcher, int32_t id) const {
  if (vocab_->is_end(id)) return matcher.CanEnd();
  const std::string_view bytes = vocab_->piece(id);
  return !bytes.empty() && AcceptsBytes(matcher.state(), bytes);
}

void TokenMasker::FillMaskByEveryToken(const GrammarMatcher& matcher, TokenMask& mask) const {
  mask.Reset(vocab_->n_vocab());
  for (int32_t id = 0; id < vocab_->n_vocab(); ++id) {
    if (vocab_->is_end(id)
            ? matcher.CanEnd()
            : !vocab_->piece(id).empty() && GrammarMatcher(matcher).Accept(vocab_->piece(id))) {
      mask.Set(id);
    }
  }
}

}  // namespace kvserve
