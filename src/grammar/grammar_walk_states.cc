#include "grammar/grammar_walk_states.h"

#include <functional>
#include <utility>

namespace kvserve {
namespace {

size_t Mix(size_t h, size_t v) { return h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2)); }

}  // namespace

GrammarWalkStates::GrammarWalkStates() : index_(64, Hash{&interned_}, Equal{&interned_}) {}

GrammarWalkStates::GrammarWalkStates(const Grammar& grammar, const GrammarState& start,
                                     size_t max_states)
    : GrammarWalkStates() {
  Reset(grammar, start, max_states);
}

void GrammarWalkStates::Reset(const Grammar& grammar, const GrammarState& start,
                              size_t max_states) {
  // Rows of more states than this are given back rather than kept for the next walk.
  constexpr size_t kKeptStates = 256;
  grammar_ = &grammar;
  max_states_ = max_states;
  index_.clear();
  interned_.clear();
  state_flags_.clear();
  if (next_.capacity() > kKeptStates * 256) {
    std::vector<int32_t>().swap(next_);
  } else {
    next_.clear();
  }
  Grow(1);
  scratch_ = start;
  CanonicalizePartial(grammar, scratch_);
  depth_flags_[0] = FlagsOf(scratch_);
  ids_[0] = Intern(scratch_);
  if (ids_[0] == kLoose) std::swap(loose_[0], scratch_);
}

void GrammarWalkStates::CanonicalizePartial(const Grammar& grammar, GrammarState& state) {
  PartialChar& p = state.partial;
  if (p.n_remaining == 0) return;
  const int shift = 6 * p.n_remaining;
  const uint32_t smallest = SmallestCodePoint(p.n_bytes);
  const uint32_t largest = LargestCodePoint(p.n_bytes);
  const uint64_t lo = uint64_t{p.value} << shift;
  const uint64_t hi = lo | ((uint64_t{1} << shift) - 1);
  if (lo < smallest || hi > largest) return;  // some completions are overlong or too large
  for (const GrammarStack& stack : state.stacks) {
    if (stack.empty() || !grammar.chars(*stack.back()).ContainsAll(smallest, largest)) return;
  }
  // The least value whose completions all lie in [smallest, largest].
  p.value = (smallest + (1u << shift) - 1) >> shift;
}

uint8_t GrammarWalkStates::FlagsOf(const GrammarState& state) {
  return static_cast<uint8_t>((state.stacks.empty() ? kDead : 0) |
                              (state.has_empty_stack() ? kEmptyStack : 0) |
                              (state.overflowed ? kOverflowed : 0));
}

size_t GrammarWalkStates::Hash::operator()(int32_t id) const {
  const GrammarState& s = (*states)[static_cast<size_t>(id)];
  size_t h = Mix(s.overflowed, s.stacks.size());
  h = Mix(h, s.partial.value);
  h = Mix(h, static_cast<size_t>(s.partial.n_remaining * 8 + s.partial.n_bytes));
  for (const GrammarStack& stack : s.stacks) {
    h = Mix(h, stack.size());
    for (const GrammarElement* e : stack) h = Mix(h, std::hash<const void*>()(e));
  }
  return h;
}

bool GrammarWalkStates::Equal::operator()(int32_t a, int32_t b) const {
  const GrammarState& x = (*states)[static_cast<size_t>(a)];
  const GrammarState& y = (*states)[static_cast<size_t>(b)];
  return x.overflowed == y.overflowed && x.partial == y.partial && x.stacks == y.stacks;
}

void GrammarWalkStates::Grow(size_t depth) {
  if (ids_.size() >= depth) return;
  ids_.resize(depth, kLoose);
  loose_.resize(depth);
  depth_flags_.resize(depth);
}

int32_t GrammarWalkStates::Intern(GrammarState& state) {
  const auto id = static_cast<int32_t>(interned_.size());
  interned_.push_back(std::move(state));
  const auto [it, inserted] = index_.insert(id);
  if (inserted && interned_.size() <= max_states_) {
    next_.resize(interned_.size() * 256, kUnknown);
    state_flags_.push_back(FlagsOf(interned_.back()));
    return id;
  }
  const int32_t found = inserted ? kLoose : *it;
  if (inserted) index_.erase(it);
  state = std::move(interned_.back());
  interned_.pop_back();
  return found;
}

void GrammarWalkStates::StepNew(size_t d, uint8_t byte) {
  Grow(d + 2);
  const int32_t from = ids_[d];
  if (from >= 0) {
    const int32_t known = next_[static_cast<size_t>(from) * 256 + byte];
    if (known != kUnknown) {  // stepped before; Step found no room for depth d + 1
      ids_[d + 1] = known;
      depth_flags_[d + 1] = state_flags_[static_cast<size_t>(known)];
      return;
    }
  }
  StepByte(*grammar_, at(d), byte, scratch_);
  CanonicalizePartial(*grammar_, scratch_);
  depth_flags_[d + 1] = FlagsOf(scratch_);
  const int32_t id = Intern(scratch_);
  if (from >= 0 && id >= 0) next_[static_cast<size_t>(from) * 256 + byte] = id;
  ids_[d + 1] = id;
  if (id == kLoose) std::swap(loose_[d + 1], scratch_);
}

}  // namespace kvserve
