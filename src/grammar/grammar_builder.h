// Builds a Grammar rule by rule and checks it when done: what GbnfParser fills as it reads.
// Rules are named; a reference to a rule not yet defined gets its id at once and must be defined
// before Finish(). Repetitions and groups become generated rules ("name_3"). Finish() refuses an
// undefined rule, a rule that derives no finite string, left recursion (also through elements
// that can match nothing: `a ::= b? a "x"`), and anything over the limits, naming the rule.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "util/status.h"

namespace kvserve {

using GrammarSequence = std::vector<GrammarElement>;  // one alternative, without its kEnd

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const GrammarLimits& limits) : limits_(limits) {}

  // The id of rule `name`, created (undefined) on first use.
  uint32_t RuleId(std::string_view name);
  // Gives rule `id` its alternatives; defining a rule twice is an error naming it.
  Status Define(uint32_t id, std::vector<GrammarSequence> alternatives);
  // A new rule named after `base` with these alternatives; returns its id.
  Result<uint32_t> AddGenerated(std::string_view base, std::vector<GrammarSequence> alternatives);
  // The element matching one character of `set` (sets are shared by value).
  GrammarElement Chars(CharSet set);
  // Appends `unit` repeated min..max times (max nullopt: unbounded) to `out`, through generated
  // rules; `unit` is one or more elements that repeat together.
  Status AppendRepeat(std::string_view base, const GrammarSequence& unit, int min,
                      std::optional<int> max, GrammarSequence& out);

  // The checked grammar with `root_name` as its start rule.
  Result<std::shared_ptr<const Grammar>> Finish(std::string_view root_name) &&;

 private:
  Status CheckSize() const;
  Status CheckDefined() const;
  Status CheckProductive() const;
  Status CheckLeftRecursion() const;
  std::vector<bool> Nullable() const;

  GrammarLimits limits_;
  std::vector<GrammarRule> rules_;
  std::vector<bool> defined_;
  std::map<std::string, uint32_t, std::less<>> ids_;
  std::vector<CharSet> char_sets_;
  std::map<std::pair<std::vector<std::pair<uint32_t, uint32_t>>, bool>, uint32_t> set_ids_;
  size_t n_elements_ = 0;
  int generated_ = 0;
};

}  // namespace kvserve
