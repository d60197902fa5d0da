#include "grammar/grammar_matcher.h"

#include <algorithm>

namespace kvserve {
namespace {

using Kind = GrammarElement::Kind;

// Stacks no longer used, kept with their capacity: a mask walk makes and drops a few stacks per
// byte of every token, and reusing their buffers saves an allocation each time. Per thread.
thread_local std::vector<GrammarStack> spare_stacks;

// A stack with the entries of `from` (a spare buffer when there is one).
GrammarStack CopyOf(const GrammarStack& from) {
  if (spare_stacks.empty()) return from;
  GrammarStack out = std::move(spare_stacks.back());
  spare_stacks.pop_back();
  out.assign(from.begin(), from.end());
  return out;
}

// Empties `stacks`, keeping their buffers for CopyOf (up to a bound).
void Recycle(std::vector<GrammarStack>& stacks) {
  for (GrammarStack& s : stacks) {
    if (spare_stacks.size() < 4096) spare_stacks.push_back(std::move(s));
  }
  stacks.clear();
}

// Appends the stacks that survive consuming the whole character `cp`.
bool AdvanceChar(const Grammar& grammar, const std::vector<GrammarStack>& stacks, uint32_t cp,
                 std::vector<GrammarStack>& out) {
  for (const GrammarStack& stack : stacks) {
    if (stack.empty() || !grammar.chars(*stack.back()).Contains(cp)) continue;
    GrammarStack next = CopyOf(stack);
    next.back() = stack.back() + 1;
    if (!ExpandStack(grammar, std::move(next), out)) return false;
  }
  return true;
}

// The code points a character can still become: [lo, hi] (lo > hi: none).
std::pair<uint32_t, uint32_t> Completions(const PartialChar& p) {
  const int shift = 6 * p.n_remaining;
  const uint32_t lo = std::max(p.value << shift, SmallestCodePoint(p.n_bytes));
  const uint32_t hi = std::min((p.value << shift) | ((1u << shift) - 1), 0x10FFFFu);
  return {lo, hi};
}

}  // namespace

bool ExpandStack(const Grammar& grammar, GrammarStack stack, std::vector<GrammarStack>& out) {
  const GrammarLimits& limits = grammar.limits();
  // Pop finished alternatives.
  while (!stack.empty() && stack.back()->kind == Kind::kEnd) stack.pop_back();
  if (stack.empty() || stack.back()->kind == Kind::kChars) {
    if (out.size() >= limits.max_stacks) return false;
    out.push_back(std::move(stack));
    return true;
  }
  // A rule reference: continue after it once the rule is done (no entry when nothing follows,
  // so that repetitions written as right recursion keep a stack of constant depth).
  const GrammarElement* ref = stack.back();
  stack.pop_back();
  if ((ref + 1)->kind != Kind::kEnd) stack.push_back(ref + 1);
  if (stack.size() >= limits.max_stack_depth) return false;
  for (const auto& alternative : grammar.rules()[ref->index].alternatives) {
    GrammarStack next = CopyOf(stack);
    next.push_back(alternative.data());
    if (!ExpandStack(grammar, std::move(next), out)) return false;
  }
  if (spare_stacks.size() < 4096) spare_stacks.push_back(std::move(stack));
  return true;
}

void Deduplicate(std::vector<GrammarStack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
}

void StepByte(const Grammar& grammar, const GrammarState& in, uint8_t byte, GrammarState& out) {
  Recycle(out.stacks);
  out.overflowed = false;
  out.partial = {};
  if (in.overflowed) {
    out.overflowed = true;
    return;
  }
  uint32_t cp = 0;
  if (in.partial.n_remaining == 0) {
    if (byte < 0x80) {
      cp = byte;
    } else if ((byte & 0xE0) == 0xC0) {
      out.partial = {.value = byte & 0x1Fu, .n_remaining = 1, .n_bytes = 2};
    } else if ((byte & 0xF0) == 0xE0) {
      out.partial = {.value = byte & 0x0Fu, .n_remaining = 2, .n_bytes = 3};
    } else if ((byte & 0xF8) == 0xF0) {
      out.partial = {.value = byte & 0x07u, .n_remaining = 3, .n_bytes = 4};
    } else {
      return;  // a continuation byte or an invalid one where a character starts
    }
  } else {
    if ((byte & 0xC0) != 0x80) return;  // not a continuation byte
    out.partial = {.value = (in.partial.value << 6) | (byte & 0x3Fu),
                   .n_remaining = in.partial.n_remaining - 1,
                   .n_bytes = in.partial.n_bytes};
    if (out.partial.n_remaining == 0) {
      cp = out.partial.value;
      const bool valid = cp >= SmallestCodePoint(out.partial.n_bytes) && cp <= 0x10FFFF;
      out.partial = {};
      if (!valid) return;
    }
  }
  if (out.partial.n_remaining > 0) {
    // An unfinished character: keep the stacks one of its completions can continue.
    const auto [lo, hi] = Completions(out.partial);
    if (lo > hi) return;
    for (const GrammarStack& stack : in.stacks) {
      if (!stack.empty() && grammar.chars(*stack.back()).Intersects(lo, hi)) {
        out.stacks.push_back(CopyOf(stack));
      }
    }
    return;
  }
  if (!AdvanceChar(grammar, in.stacks, cp, out.stacks)) {
    out.stacks.clear();
    out.overflowed = true;
    return;
  }
  Deduplicate(out.stacks);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)) {
  const auto& root = grammar_->rules()[grammar_->root()];
  for (const auto& alternative : root.alternatives) {
    if (!ExpandStack(*grammar_, GrammarStack{alternative.data()}, state_.stacks)) {
      state_.stacks.clear();
      state_.overflowed = true;
      break;
    }
  }
  Deduplicate(state_.stacks);
}

bool GrammarMatcher::Accept(std::string_view bytes) {
  GrammarState current = state_;
  for (char c : bytes) {
    StepByte(*grammar_, current, static_cast<uint8_t>(c), scratch_);
    std::swap(current, scratch_);
    if (current.stacks.empty()) return false;
  }
  state_ = std::move(current);
  return true;
}

}  // namespace kvserve
