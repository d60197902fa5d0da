#include "grammar/token_masker.h"

#include <algorithm>

#include "grammar/grammar_walk_states.h"

namespace kvserve {

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const GrammarVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  const std::vector<GrammarRule>& rules = grammar_->rules();
  for (const GrammarRule& rule : rules) {
    if (rule.chain_top == GrammarRule::kNoChain || rule.chain_count < 2) continue;
    const GrammarRule& top = rules[rule.chain_top];
    if (&top == &rule) continue;
    const auto& alt = rule.alternatives.front();
    chains_.push_back(ChainAlternative{.begin = alt.data(),
                                       .end = alt.data() + alt.size(),
                                       .top_begin = top.alternatives.front().data(),
                                       .count = rule.chain_count});
  }
  std::sort(chains_.begin(), chains_.end(),
            [](const ChainAlternative& a, const ChainAlternative& b) { return a.begin < b.begin; });
}

void TokenMasker::Walk(const GrammarState& start, bool isolated,
                       const std::vector<uint32_t>* subset, TokenMask& accepted,
                       std::vector<uint32_t>* uncertain) const {
  const std::vector<int32_t>& order = vocab_->order();
  const std::vector<GrammarVocab::TrieLink>& links = vocab_->links();
  const size_t n = subset ? subset->size() : order.size();
  auto position = [&](size_t j) -> size_t { return subset ? (*subset)[j] : j; };
  // Bytes the token at position b shares with the one at a < b: the least shared[] between them.
  auto common = [&](size_t a, size_t b) {
    uint32_t m = links[b].shared;
    for (size_t k = a + 1; k < b; ++k) m = std::min(m, links[k].shared);
    return m;
  };
  // states[d]: after the first d bytes of the current token; escaped[d]: on the way there a
  // state held an empty stack (isolated: the position's rule had ended) and bytes went on.
  thread_local GrammarWalkStates states;
  states.Reset(*grammar_, start);
  std::vector<char> escaped(1, 0);
  size_t valid = 0;  // states[0..valid] hold the prefix of the token at `last`
  size_t last = 0;
  for (size_t j = 0; j < n;) {
    const size_t i = position(j);
    if (j > 0) valid = std::min<size_t>(valid, common(last, i));
    last = i;
    const std::string_view bytes = vocab_->sorted_piece(i);
    if (escaped.size() < bytes.size() + 1) escaped.resize(bytes.size() + 1);
    size_t d = valid;
    bool dead = false;
    while (d < bytes.size()) {
      const bool ran_past = isolated && (states.flags(d) & (GrammarWalkStates::kEmptyStack |
                                                            GrammarWalkStates::kOverflowed)) != 0;
      escaped[d + 1] = escaped[d] || ran_past;
      states.Step(d, static_cast<uint8_t>(bytes[d]));
      ++d;
      if ((states.flags(d) & GrammarWalkStates::kDead) != 0) {
        dead = true;
        break;
      }
    }
    valid = d;
    if (!dead) {
      accepted.Set(order[i]);
      ++j;
      continue;
    }
    // Every token that shares the dead prefix bytes[0, d) is decided with it.
    // A stack limit hit is undecided too: a derived key may hold fewer stacks.
    const bool undecided =
        uncertain != nullptr &&
        ((isolated && escaped[d]) || (states.flags(d) & GrammarWalkStates::kOverflowed) != 0);
    if (!undecided) {  // rejected: jump to the first token that does not share the prefix
      size_t p = d == 1 ? vocab_->after_first_byte(static_cast<uint8_t>(bytes[0])) : last + 1;
      while (p < order.size() && links[p].shared >= d) p = links[p].skip;
      j = subset ? static_cast<size_t>(
                       std::lower_bound(subset->begin() + static_cast<std::ptrdiff_t>(j) + 1,
                                        subset->end(), static_cast<uint32_t>(p)) -
                       subset->begin())
                 : p;
      last = p - 1;  // the tokens from p on share with the dead one what they share with p - 1
      valid = std::min<size_t>(valid, d);
      continue;
    }
    for (;;) {  // undecided: each token under the prefix goes to `uncertain`
      uncertain->push_back(static_cast<uint32_t>(last));
      if (++j == n) break;
      const size_t next = position(j);
      if (common(last, next) < d) break;
      last = next;
    }
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

const TokenMasker::ChainAlternative* TokenMasker::FindChain(const GrammarElement* entry) const {
  auto it = std::upper_bound(
      chains_.begin(), chains_.end(), entry,
      [](const GrammarElement* e, const ChainAlternative& c) { return std::less<>()(e, c.begin); });
  if (it == chains_.begin()) return nullptr;
  --it;
  return std::less<>()(entry, it->end) ? &*it : nullptr;
}

const TokenMasker::PositionMasks* TokenMasker::ForTop(const GrammarStack& stack) {
  const size_t depth = std::min(stack.size(), kKeyDepth);
  // A whole stack's key starts with a null entry: its walk knows the real bottom, so its masks
  // must not serve a deeper stack with the same top.
  GrammarStack key;
  if (depth == stack.size()) key.push_back(nullptr);
  key.insert(key.end(), stack.end() - static_cast<std::ptrdiff_t>(depth), stack.end());
  std::lock_guard<std::mutex> lock(mutex_);
  return ForKey(key);
}

const TokenMasker::PositionMasks* TokenMasker::ForKey(const GrammarStack& key) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.get();
  const size_t bytes = (static_cast<size_t>(vocab_->n_vocab()) + 7) / 8;
  if (cache_bytes_ + bytes > kMaxCacheBytes) return nullptr;
  const bool whole = key.front() == nullptr;
  const size_t depth = key.size() - (whole ? 1 : 0);

  // The cheaper key this one derives from, and the tokens to walk again (header).
  const PositionMasks* from = nullptr;
  std::vector<uint32_t> again;
  GrammarStack canonical = key;
  uint32_t fits = UINT32_MAX;  // tokens of at most this many characters keep from's decision
  for (const GrammarElement*& entry : canonical) {
    const ChainAlternative* chain = entry ? FindChain(entry) : nullptr;
    if (chain == nullptr) continue;
    entry = chain->top_begin + (entry - chain->begin);
    // The token's first character goes to the unit under way (the stack's top lies in it), the
    // others to at most c - 1 more units, which more_k allows while c <= k.
    fits = std::min(fits, chain->count);
  }
  auto masks = std::make_unique<PositionMasks>();
  if (fits != UINT32_MAX) {
    from = ForKey(canonical);
    if (from == nullptr) return nullptr;
    masks->accepted = from->accepted;
    std::vector<uint32_t> longer = vocab_->LongerThan(fits);
    std::erase_if(longer, [&](uint32_t i) { return !from->accepted.Test(vocab_->order()[i]); });
    for (uint32_t i : longer) masks->accepted.Clear(vocab_->order()[i]);
    again.resize(longer.size() + from->uncertain.size());
    std::merge(longer.begin(), longer.end(), from->uncertain.begin(), from->uncertain.end(),
               again.begin());
  } else if (whole || depth > kBaseDepth) {
    GrammarStack shorter(key.begin() + 1, key.end());  // without the null, or the bottom entry
    from = ForKey(shorter);
    if (from == nullptr) return nullptr;
    masks->accepted = from->accepted;
    again = from->uncertain;
  } else {
    masks->accepted.Reset(vocab_->n_vocab());
  }

  GrammarState start;
  start.stacks.emplace_back(key.begin() + (whole ? 1 : 0), key.end());
  Walk(start, /*isolated=*/!whole, from ? &again : nullptr, masks->accepted, &masks->uncertain);
  walked_tokens_ += from ? again.size() : vocab_->order().size();
  cache_bytes_ += bytes + masks->uncertain.size() * sizeof(uint32_t);
  return cache_.emplace(key, std::move(masks)).first->second.get();
}

size_t TokenMasker::cached_positions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.size();
}

size_t TokenMasker::walked_tokens() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return walked_tokens_;
}

void TokenMasker::FillMask(const GrammarMatcher& matcher, TokenMask& mask) {
  mask.Reset(vocab_->n_vocab());
  const GrammarState& state = matcher.state();
  if (state.overflowed) return;
  if (state.partial.n_remaining > 0) {
    Walk(state, /*isolated=*/false, nullptr, mask, nullptr);
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
      Walk(single, /*isolated=*/false, nullptr, mask, nullptr);
      continue;
    }
    mask.Add(masks->accepted);
    for (uint32_t i : masks->uncertain) {
      const int32_t id = vocab_->order()[i];
      if (!mask.Test(id) && AcceptsBytes(single, vocab_->sorted_piece(i))) mask.Set(id);
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
