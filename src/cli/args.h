// A small command-line flag parser: `--name value`, `--name=value`, `-n value`, `--switch`, over a
// FlagTable. Unknown flags (with the nearest known one suggested), missing values and malformed
// numbers are errors that name the flag and the value.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/flag_table.h"
#include "util/status.h"

namespace kvserve {

class Args {
 public:
  // Flags are looked up in `table` and stored under their long name ("-m" -> "--model"); words
  // that are not flags are positional. Parsing stops at -h/--help, which sets help_requested().
  static Result<Args> Parse(const std::vector<std::string>& argv, const FlagTable& table);

  bool help_requested() const { return help_requested_; }
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
  bool help_requested_ = false;
};

// Parses "1,2,3" into integers; an error names the bad item.
Result<std::vector<int32_t>> ParseIntList(const std::string& text, const std::string& flag);

}  // namespace kvserve
