// A context-free grammar over Unicode code points, in the form the matcher walks: rules of
// alternatives, each alternative a sequence of elements (a character set or a reference to a rule)
// ending with kEnd. Built by GbnfParser (grammar/gbnf_parser.h) and checked there: every rule
// defined and productive, no left recursion (also through empty-matching elements), within
// GrammarLimits. Immutable after construction and shared between requests; the matcher keeps
// pointers into the alternatives, so a Grammar never moves its vectors after it is built.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace kvserve {

// What a client's grammar or schema may cost; exceeding one is a 400 that names the limit.
struct GrammarLimits {
  size_t max_source_bytes = 256 * 1024;  // GBNF text or JSON Schema, serialized
  size_t max_rules = 8192;               // rules after expanding repetitions and groups
  size_t max_elements = 200000;          // elements in all alternatives together
  int max_nesting = 64;                  // parentheses in GBNF, nested schemas in JSON Schema
  int max_repeat = 1000;                 // the largest m or n in x{m,n}
  size_t max_stacks = 4096;              // parse stacks alive at once while matching
  size_t max_stack_depth = 1024;         // entries in one parse stack
};

// A set of code points: sorted, disjoint, inclusive ranges, or everything outside them.
struct CharSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  bool negated = false;

  bool Contains(uint32_t cp) const;
  // Whether some code point in [lo, hi] is in the set (for a character whose first UTF-8 bytes
  // are known: every completion lies in such an interval).
  bool Intersects(uint32_t lo, uint32_t hi) const;
  // Whether every code point in [lo, hi] is in the set.
  bool ContainsAll(uint32_t lo, uint32_t hi) const;
  bool operator==(const CharSet&) const = default;
};

struct GrammarElement {
  enum class Kind : uint8_t { kEnd, kChars, kRule };
  Kind kind = Kind::kEnd;
  uint32_t index = 0;  // kChars: into Grammar::char_sets(); kRule: into Grammar::rules()
};

// A bounded repetition x{m,n} is m copies of x followed by a chain of generated rules
//   more_k ::= x more_{k-1} | (empty)      (more_1 ::= x | (empty))
// for k = n-m down to 1: inside more_k, up to k-1 more copies of x may follow the one under way.
// The rules of a chain have the same shape, so the token masker (grammar/token_masker.h) walks
// the vocabulary from the outermost one only and derives the others from it (a token of c
// characters cannot tell more_k from more_K while c <= k).
struct GrammarRule {
  static constexpr uint32_t kNoChain = UINT32_MAX;
  std::string name;
  std::vector<std::vector<GrammarElement>> alternatives;  // each ends with kEnd
  uint32_t chain_top = kNoChain;  // more_k: the id of its chain's outermost rule (more_{n-m})
  uint32_t chain_count = 0;       // more_k: k
};

class Grammar {
 public:
  Grammar(std::vector<GrammarRule> rules, std::vector<CharSet> char_sets, uint32_t root,
          GrammarLimits limits)
      : rules_(std::move(rules)), char_sets_(std::move(char_sets)), root_(root), limits_(limits) {}
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  const std::vector<GrammarRule>& rules() const { return rules_; }
  const std::vector<CharSet>& char_sets() const { return char_sets_; }
  const CharSet& chars(const GrammarElement& e) const { return char_sets_[e.index]; }
  uint32_t root() const { return root_; }
  const GrammarLimits& limits() const { return limits_; }

 private:
  std::vector<GrammarRule> rules_;
  std::vector<CharSet> char_sets_;
  uint32_t root_;
  GrammarLimits limits_;
};

}  // namespace kvserve
