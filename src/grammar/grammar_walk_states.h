// The states of one walk over the vocabulary's trie (grammar/token_masker.h): the state after the
// first d bytes of the current token, for every d up to the deepest reached, with the transitions
// seen so far remembered. A walk meets the same few states again and again (inside a JSON string
// every ordinary byte leads back to the state it left, and every token there is walked to its
// end), so once a (state, byte) pair has been stepped, later bytes cost a table lookup instead of
// a StepByte that copies, expands and sorts parse stacks.
//
// States are interned up to a bound (UTF-8 characters make many: an unfinished character's state
// holds its bits so far); past it, new states are held per depth without their transitions, and
// the walk is as it was without the table. States are kept with CanonicalizePartial applied: a
// state here behaves as StepByte's would for every byte that follows, but an unfinished
// character's bits may differ. One walk, one thread.
//
//   GrammarWalkStates walk(grammar, start);   // depth 0 is `start` (or walk.Reset(grammar, start))
//   walk.Step(0, 'a');                         // depth 1: after 'a'
//   walk.at(1).stacks.empty();                 // 'a' continues nothing
#pragma once

#include <cstdint>
#include <deque>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/grammar_matcher.h"

namespace kvserve {

class GrammarWalkStates {
 public:
  // States remembered with their transitions (each costs 1 KiB of table: 256 successors).
  static constexpr size_t kDefaultMaxStates = 4096;

  GrammarWalkStates(const Grammar& grammar, const GrammarState& start,
                    size_t max_states = kDefaultMaxStates);
  // Empty, for Reset: a walker kept per thread saves each walk its allocations (a masked request
  // makes hundreds of walks, most of them over a few tokens).
  GrammarWalkStates();
  // Starts a new walk at `start`, keeping the buffers (within a bound) of the last one.
  void Reset(const Grammar& grammar, const GrammarState& start,
             size_t max_states = kDefaultMaxStates);
  GrammarWalkStates(const GrammarWalkStates&) = delete;
  GrammarWalkStates& operator=(const GrammarWalkStates&) = delete;

  // What the walk's inner loop asks of a state, without reading it (flags()).
  static constexpr uint8_t kDead = 1;        // no stack left: the bytes continue nothing
  static constexpr uint8_t kEmptyStack = 2;  // one stack is empty: the text may end here
  static constexpr uint8_t kOverflowed = 4;  // a stack limit was hit

  // The state after the first d bytes; d at most the deepest depth Step has set.
  const GrammarState& at(size_t d) const {
    return ids_[d] >= 0 ? interned_[static_cast<size_t>(ids_[d])] : loose_[d];
  }
  uint8_t flags(size_t d) const { return depth_flags_[d]; }
  // Sets depth d + 1 to the state after at(d) and `byte`; deeper depths become stale.
  void Step(size_t d, uint8_t byte) {
    if (d + 2 <= ids_.size() && ids_[d] >= 0) {
      const int32_t known = next_[static_cast<size_t>(ids_[d]) * 256 + byte];
      if (known != kUnknown) {
        ids_[d + 1] = known;
        depth_flags_[d + 1] = state_flags_[static_cast<size_t>(known)];
        return;
      }
    }
    StepNew(d, byte);
  }
  // Rewrites an unfinished character's bits with one representative when they cannot matter: when
  // every stack's character set holds every code point of the character's length and all the
  // character's completions lie in that length's range, each continuation byte keeps every stack
  // and the finished character advances each the same way, whatever the bits. So a walk meets one
  // state per stacks and bytes left, not one per prefix of every character of the vocabulary
  // (Gemma 3's 262k tokens made about 34k transitions inside a JSON string without this).
  static void CanonicalizePartial(const Grammar& grammar, GrammarState& state);
  // States interned so far (for tests and traces).
  size_t interned() const { return interned_.size(); }

 private:
  static constexpr int32_t kLoose = -1;    // ids_: the state is in loose_
  static constexpr int32_t kUnknown = -1;  // next_: not stepped yet

  // The id of `state` (moved into the table when new), or kLoose when the table is full.
  int32_t Intern(GrammarState& state);
  void Grow(size_t depth);
  // Step for a pair not stepped before (or a state not interned).
  void StepNew(size_t d, uint8_t byte);
  static uint8_t FlagsOf(const GrammarState& state);

  struct Hash {
    const std::deque<GrammarState>* states;
    size_t operator()(int32_t id) const;
  };
  struct Equal {
    const std::deque<GrammarState>* states;
    bool operator()(int32_t a, int32_t b) const;
  };

  const Grammar* grammar_ = nullptr;
  size_t max_states_ = kDefaultMaxStates;
  std::vector<int32_t> ids_;           // per depth: an id into interned_, or kLoose
  std::vector<GrammarState> loose_;    // per depth: the state when it is not interned
  std::vector<uint8_t> depth_flags_;   // per depth: FlagsOf(at(d))
  std::vector<uint8_t> state_flags_;   // per interned state: FlagsOf
  std::deque<GrammarState> interned_;  // a deque: at() references stay valid as it grows
  std::vector<int32_t> next_;          // [interned_.size() * 256]: successor ids, or kUnknown
  std::unordered_set<int32_t, Hash, Equal> index_;
  GrammarState scratch_;
};

}  // namespace kvserve
