// A small command-line flag parser: `--name value`, `-n value`, `--flag`. Unknown flags, missing
// values and malformed numbers are errors that name the flag and the value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "util/status.h"

namespace kvserve {

class Args {
 public:
  // `value_flags` take a value; `bool_flags` do not. Aliases map short to long names ("-m" ->
  // "--model"). Words that are not flags are positional.
  struct Spec {
    std::vector<std::string> value_flags;
    std::vector<std::string> bool_flags;
    std::map<std::string, std::string> aliases;
  };
  static Result<Args> Parse(const std::vector<std::string>& argv, const Spec& spec);

  bool Has(const std::string& flag) const { return values_.count(flag) || flags_.count(flag); }
  std::optional<std::string> Get(const std::string& flag) const;
  std::string GetOr(const std::string& flag, const std::string& fallback) const;
  Result<int64_t> GetInt(const std::string& flag, int64_t fallback) const;
  Result<double> GetDouble(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  std::vector<std::string> positional_;
};

// Parses "1,2,3" into integers; an error names the bad item.
Result<std::vector<int32_t>> ParseIntList(const std::string& text, const std::string& flag);

}  // namespace kvserve
