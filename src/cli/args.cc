#include "cli/args.h"

#include <cerrno>
#include <cstdlib>

#include "cli/suggestion.h"

namespace kvserve {

Result<Args> Args::Parse(const std::vector<std::string>& argv, const FlagTable& table) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string word = argv[i];
    if (word.size() < 2 || word[0] != '-' || (word[1] >= '0' && word[1] <= '9')) {
      args.positional_.push_back(word);
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = word.find('='); eq != std::string::npos && word.rfind("--", 0) == 0) {
      inline_value = word.substr(eq + 1);
      word = word.substr(0, eq);
    }
    const Flag* flag = table.Find(word);
    if (flag == nullptr) {
      return Result<Args>::InvalidArgument("unknown flag '" + argv[i] + "'" +
                                           DidYouMean(word, table.Names()));
    }
    if (flag == &HelpFlag()) {
      args.help_requested_ = true;
      return args;
    }
    if (!flag->takes_value()) {
      if (inline_value) {
        return Result<Args>::InvalidArgument("flag " + flag->name + " takes no value (got '" +
                                             argv[i] + "')");
      }
      args.flags_.insert(flag->name);
    } else if (inline_value) {
      args.values_[flag->name] = *inline_value;
    } else if (i + 1 < argv.size()) {
      args.values_[flag->name] = argv[++i];
    } else {
      return Result<Args>::InvalidArgument("flag " + flag->name + " needs a value (" +
                                           flag->value_name + ")");
    }
  }
  return args;
}

std::optional<std::string> Args::Get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::GetOr(const std::string& flag, const std::string& fallback) const {
  return Get(flag).value_or(fallback);
}

Result<int64_t> Args::GetInt(const std::string& flag, int64_t fallback) const {
  auto text = Get(flag);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text->c_str(), &end, 10);
  if (text->empty() || *end != '\0' || errno == ERANGE) {
    return Result<int64_t>::InvalidArgument("flag " + flag + ": '" + *text + "' is not an integer");
  }
  return static_cast<int64_t>(value);
}

Result<double> Args::GetDouble(const std::string& flag, double fallback) const {
  auto text = Get(flag);
  if (!text) return fallback;
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text->c_str(), &end);
  if (text->empty() || *end != '\0' || errno == ERANGE) {
    return Result<double>::InvalidArgument("flag " + flag + ": '" + *text + "' is not a number");
  }
  return value;
}

Result<std::vector<int32_t>> ParseIntList(const std::string& text, const std::string& flag) {
  std::vector<int32_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(start, comma - start);
    errno = 0;
    char* end = nullptr;
    const long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || value < INT32_MIN || value > INT32_MAX) {
      return Result<std::vector<int32_t>>::InvalidArgument("flag " + flag + ": '" + item +
                                                           "' is not an integer");
    }
    out.push_back(static_cast<int32_t>(value));
    start = comma + 1;
  }
  return out;
}

}  // namespace kvserve
