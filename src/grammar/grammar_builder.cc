#include "grammar/grammar_builder.h"

#include <functional>

namespace kvserve {
namespace {

using Kind = GrammarElement::Kind;

std::string Quoted(std::string_view name) { return "'" + std::string(name) + "'"; }

}  // namespace

uint32_t GrammarBuilder::RuleId(std::string_view name) {
  auto it = ids_.find(name);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(rules_.size());
  rules_.push_back(GrammarRule{.name = std::string(name), .alternatives = {}});
  defined_.push_back(false);
  ids_.emplace(std::string(name), id);
  return id;
}

Status GrammarBuilder::Define(uint32_t id, std::vector<GrammarSequence> alternatives) {
  if (defined_[id]) {
    return Status::InvalidArgument("grammar: rule " + Quoted(rules_[id].name) +
                                   " is defined twice");
  }
  defined_[id] = true;
  for (GrammarSequence& alt : alternatives) {
    n_elements_ += alt.size() + 1;
    alt.push_back(GrammarElement{.kind = Kind::kEnd});
  }
  rules_[id].alternatives = std::move(alternatives);
  return CheckSize();
}

Result<uint32_t> GrammarBuilder::AddGenerated(std::string_view base,
                                              std::vector<GrammarSequence> alternatives) {
  std::string name;
  do {
    name = std::string(base) + "_" + std::to_string(++generated_);
  } while (ids_.count(name) != 0);
  const uint32_t id = RuleId(name);
  KVSERVE_RETURN_IF_ERROR(Define(id, std::move(alternatives)));
  return id;
}

GrammarElement GrammarBuilder::Chars(CharSet set) {
  auto key = std::make_pair(set.ranges, set.negated);
  auto [it, added] = set_ids_.emplace(std::move(key), static_cast<uint32_t>(char_sets_.size()));
  if (added) char_sets_.push_back(std::move(set));
  return GrammarElement{.kind = Kind::kChars, .index = it->second};
}

Status GrammarBuilder::AppendRepeat(std::string_view base, const GrammarSequence& unit, int min,
                                    std::optional<int> max, GrammarSequence& out) {
  if (min > limits_.max_repeat || (max && *max > limits_.max_repeat)) {
    return Status::InvalidArgument("grammar: repetition {" + std::to_string(min) + "," +
                                   (max ? std::to_string(*max) : "") + "} in rule " + Quoted(base) +
                                   " exceeds the limit of " + std::to_string(limits_.max_repeat) +
                                   " (limit max_repeat)");
  }
  if (static_cast<size_t>(min) * unit.size() + n_elements_ > limits_.max_elements) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits_.max_elements) +
                                   " elements (limit max_elements)");
  }
  for (int i = 0; i < min; ++i) out.insert(out.end(), unit.begin(), unit.end());
  if (!max) {  // star ::= unit star | (empty)
    const uint32_t id = RuleId(std::string(base) + "_star_" + std::to_string(++generated_));
    GrammarSequence loop = unit;
    loop.push_back(GrammarElement{.kind = Kind::kRule, .index = id});
    KVSERVE_RETURN_IF_ERROR(Define(id, {loop, {}}));
    out.push_back(GrammarElement{.kind = Kind::kRule, .index = id});
    return Status::Ok();
  }
  // Up to (max - min) more: opt_k ::= unit opt_{k-1} | (empty), built innermost first.
  // Each rule of the chain names the outermost one and its own k (GrammarRule).
  std::optional<uint32_t> inner;
  std::vector<uint32_t> chain;
  for (int i = min; i < *max; ++i) {
    GrammarSequence more = unit;
    if (inner) more.push_back(GrammarElement{.kind = Kind::kRule, .index = *inner});
    auto id = AddGenerated(base, {more, {}});
    if (!id.ok()) return id.status();
    inner = *id;
    chain.push_back(*id);
  }
  for (size_t k = 1; k <= chain.size(); ++k) {
    rules_[chain[k - 1]].chain_top = chain.back();
    rules_[chain[k - 1]].chain_count = static_cast<uint32_t>(k);
  }
  if (inner) out.push_back(GrammarElement{.kind = Kind::kRule, .index = *inner});
  return Status::Ok();
}

Status GrammarBuilder::CheckSize() const {
  if (rules_.size() > limits_.max_rules) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits_.max_rules) +
                                   " rules (limit max_rules)");
  }
  if (n_elements_ > limits_.max_elements) {
    return Status::InvalidArgument("grammar: more than " + std::to_string(limits_.max_elements) +
                                   " elements (limit max_elements)");
  }
  return Status::Ok();
}

Status GrammarBuilder::CheckDefined() const {
  for (size_t i = 0; i < rules_.size(); ++i) {
    if (!defined_[i]) {
      return Status::InvalidArgument("grammar: rule " + Quoted(rules_[i].name) +
                                     " is used but never defined");
    }
  }
  return Status::Ok();
}

// A rule is productive when one of its alternatives consists of productive elements only.
Status GrammarBuilder::CheckProductive() const {
  std::vector<bool> productive(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (productive[r]) continue;
      for (const auto& alt : rules_[r].alternatives) {
        bool all = true;
        for (const GrammarElement& e : alt) {
          if (e.kind == Kind::kRule && !productive[e.index]) all = false;
        }
        if (all) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  for (size_t r = 0; r < rules_.size(); ++r) {
    if (!productive[r]) {
      return Status::InvalidArgument("grammar: rule " + Quoted(rules_[r].name) +
                                     " never ends (it matches no finite text)");
    }
  }
  return Status::Ok();
}

std::vector<bool> GrammarBuilder::Nullable() const {
  std::vector<bool> nullable(rules_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (nullable[r]) continue;
      for (const auto& alt : rules_[r].alternatives) {
        bool all = true;
        for (const GrammarElement& e : alt) {
          if (e.kind == Kind::kChars || (e.kind == Kind::kRule && !nullable[e.index])) all = false;
        }
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

// Left recursion: rule r reaches itself through the leading elements of its alternatives, where
// an element is leading when everything before it in the alternative can match nothing. The
// matcher would expand such a rule forever, so it is refused.
Status GrammarBuilder::CheckLeftRecursion() const {
  const std::vector<bool> nullable = Nullable();
  std::vector<std::vector<uint32_t>> leading(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    for (const auto& alt : rules_[r].alternatives) {
      for (const GrammarElement& e : alt) {
        if (e.kind != Kind::kRule) break;
        leading[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  enum class Mark : uint8_t { kNew, kOpen, kDone };
  std::vector<Mark> mark(rules_.size(), Mark::kNew);
  std::optional<uint32_t> cycle;
  std::function<void(uint32_t)> visit = [&](uint32_t r) {
    mark[r] = Mark::kOpen;
    for (uint32_t next : leading[r]) {
      if (cycle) return;
      if (mark[next] == Mark::kOpen) cycle = next;
      if (mark[next] == Mark::kNew) visit(next);
    }
    mark[r] = Mark::kDone;
  };
  // Iterative roots; the depth of `visit` is bounded by max_rules.
  for (uint32_t r = 0; r < rules_.size() && !cycle; ++r) {
    if (mark[r] == Mark::kNew) visit(r);
  }
  if (cycle) {
    return Status::InvalidArgument("grammar: rule " + Quoted(rules_[*cycle].name) +
                                   " is left-recursive (it can reach itself before matching any "
                                   "character); write the repetition with * or + instead");
  }
  return Status::Ok();
}

Result<std::shared_ptr<const Grammar>> GrammarBuilder::Finish(std::string_view root_name) && {
  auto it = ids_.find(root_name);
  if (it == ids_.end()) {
    return Status::InvalidArgument("grammar: no " + Quoted(root_name) + " rule to start from");
  }
  KVSERVE_RETURN_IF_ERROR(CheckSize());
  KVSERVE_RETURN_IF_ERROR(CheckDefined());
  KVSERVE_RETURN_IF_ERROR(CheckProductive());
  KVSERVE_RETURN_IF_ERROR(CheckLeftRecursion());
  return std::shared_ptr<const Grammar>(
      std::make_shared<Grammar>(std::move(rules_), std::move(char_sets_), it->second, limits_));
}

}  // namespace kvserve
