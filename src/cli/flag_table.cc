#include "cli/flag_table.h"

#include <algorithm>

namespace kvserve {

namespace {

// "  -n, --n-predict N" or "      --no-cache": the column before the description.
std::string Synopsis(const Flag& flag) {
  std::string text = flag.alias.empty() ? "      " : "  " + flag.alias + ", ";
  text += flag.name;
  if (flag.takes_value()) text += " " + flag.value_name;
  return text;
}

constexpr size_t kHelpColumns = 100;

// The synopsis padded to `width`, then the description and "(default: ...)", wrapped at spaces to
// kHelpColumns with the continuation lines indented to `width`. The default is never split.
std::string HelpLine(const Flag& flag, size_t width) {
  std::vector<std::string> words;
  for (size_t begin = 0; begin < flag.help.size();) {
    const size_t end = std::min(flag.help.find(' ', begin), flag.help.size());
    words.push_back(flag.help.substr(begin, end - begin));
    begin = end + 1;
  }
  if (!flag.default_text.empty()) words.push_back("(default: " + flag.default_text + ")");
  std::string text = Synopsis(flag);
  text.resize(std::max(text.size() + 2, width), ' ');
  size_t column = text.size();
  bool line_empty = true;
  for (const std::string& word : words) {
    if (!line_empty && column + 1 + word.size() > kHelpColumns) {
      text += "\n" + std::string(width, ' ');
      column = width;
      line_empty = true;
    }
    if (!line_empty) text += ' ';
    text += word;
    column += word.size() + (line_empty ? 0 : 1);
    line_empty = false;
  }
  return text + "\n";
}

}  // namespace

const Flag& HelpFlag() {
  static const Flag kHelp{.name = "--help", .alias = "-h", .help = "print this help and exit"};
  return kHelp;
}

const Flag* FlagTable::Find(std::string_view word) const {
  for (const FlagGroup& group : groups) {
    for (const Flag& flag : group.flags) {
      if (word == flag.name || (!flag.alias.empty() && word == flag.alias)) return &flag;
    }
  }
  const Flag& help = HelpFlag();
  return word == help.name || word == help.alias ? &help : nullptr;
}

std::vector<std::string> FlagTable::Names() const {
  std::vector<std::string> names;
  for (const FlagGroup& group : groups) {
    for (const Flag& flag : group.flags) {
      names.push_back(flag.name);
      if (!flag.alias.empty()) names.push_back(flag.alias);
    }
  }
  names.push_back(HelpFlag().name);
  names.push_back(HelpFlag().alias);
  return names;
}

std::string FlagTable::Help(std::string_view summary) const {
  size_t width = Synopsis(HelpFlag()).size() + 2;
  for (const FlagGroup& group : groups) {
    for (const Flag& flag : group.flags) width = std::max(width, Synopsis(flag).size() + 2);
  }
  std::string text = "usage: kvserve " + usage + "\n\n" + std::string(summary) + "\n";
  for (size_t g = 0; g < std::max<size_t>(groups.size(), 1); ++g) {
    text += "\n" + (g < groups.size() ? groups[g].title : std::string("flags")) + ":\n";
    if (g < groups.size()) {
      for (const Flag& flag : groups[g].flags) text += HelpLine(flag, width);
    }
    if (g == 0) text += HelpLine(HelpFlag(), width);
  }
  return text;
}

}  // namespace kvserve
