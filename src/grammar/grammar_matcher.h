// Where the output stands against a Grammar: the parse stacks still alive after the bytes seen so
// far, and the leading bytes of a character not yet finished (a token may end inside a UTF-8
// character). A stack lists positions in the grammar's alternatives, bottom to top; its top is
// always a character set (stacks are expanded through rule references as soon as they are made),
// and an empty stack means the text so far is a whole document. Copyable (a draft's check works on
// a copy); one owner, no locking.
//
//   GrammarMatcher m(grammar);
//   if (m.Accept(token_bytes)) ...;   // false: the bytes cannot continue any document
//   m.CanEnd();                       // the text so far is a whole document
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace kvserve {

using GrammarStack = std::vector<const GrammarElement*>;

// The first bytes of a UTF-8 character: its value so far, how many continuation bytes remain, and
// its length in bytes (which sets the smallest code point it may encode: overlong forms are
// invalid UTF-8 and match nothing).
struct PartialChar {
  uint32_t value = 0;
  int n_remaining = 0;
  int n_bytes = 0;
  bool operator==(const PartialChar&) const = default;
};

// The code points a UTF-8 character of n_bytes may encode: shorter forms are overlong, and none
// lies past U+10FFFF.
inline uint32_t SmallestCodePoint(int n_bytes) {
  return n_bytes == 2 ? 0x80 : n_bytes == 3 ? 0x800 : n_bytes == 4 ? 0x10000 : 0;
}
inline uint32_t LargestCodePoint(int n_bytes) {
  return n_bytes == 1 ? 0x7F : n_bytes == 2 ? 0x7FF : n_bytes == 3 ? 0xFFFF : 0x10FFFF;
}

// The stacks and the unfinished character: what StepByte maps to its successor.
struct GrammarState {
  std::vector<GrammarStack> stacks;  // sorted, no duplicates
  PartialChar partial;
  bool overflowed = false;  // a stack limit was hit: treated as no stack at all
  bool has_empty_stack() const { return !stacks.empty() && stacks.front().empty(); }
};

// Adds `stack` to `out` after expanding its top through rule references (several stacks when a
// rule has several alternatives); a finished alternative pops. False when a limit is hit.
bool ExpandStack(const Grammar& grammar, GrammarStack stack, std::vector<GrammarStack>& out);
// The state after one more byte; its stacks are empty when the byte continues none of them.
void StepByte(const Grammar& grammar, const GrammarState& in, uint8_t byte, GrammarState& out);
// Sorts and removes duplicates (after expansions).
void Deduplicate(std::vector<GrammarStack>& stacks);

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar);

  // Consumes `bytes`; false, with the state unchanged, when they continue no document.
  bool Accept(std::string_view bytes);
  bool CanEnd() const { return state_.partial.n_remaining == 0 && state_.has_empty_stack(); }
  // Nothing but the end may follow.
  bool Done() const { return CanEnd() && state_.stacks.size() == 1; }
  const GrammarState& state() const { return state_; }
  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& shared_grammar() const { return grammar_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  GrammarState state_;
  GrammarState scratch_;
};

}  // namespace kvserve
