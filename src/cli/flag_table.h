// A command's flags as one table: Args::Parse reads it to parse the command line and Help() prints
// it for -h/--help, so the help cannot list a flag the parser rejects or miss one it accepts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

struct Flag {
  std::string name;          // "--n-predict"
  std::string alias;         // "-n"; empty: none
  std::string value_name;    // what the value is, in help: "N", "FILE", "SIZE"; empty: a switch
  std::string default_text;  // printed as "(default: ...)"; empty: no default to show
  std::string help;          // one line

  bool takes_value() const { return !value_name.empty(); }
};

struct FlagGroup {
  std::string title;  // the heading in help: "sampling", "engine"
  std::vector<Flag> flags;
};

struct FlagTable {
  std::string usage;  // what follows "usage: kvserve ", e.g. "run -m MODEL -p TEXT [options]"
  std::vector<FlagGroup> groups;

  // The entry whose name or alias is `word`, nullptr when none. -h/--help is in every table.
  const Flag* Find(std::string_view word) const;
  // Every name and alias, -h/--help included, in table order (the candidates of a suggestion).
  std::vector<std::string> Names() const;
  // The text of `kvserve COMMAND --help`: usage, summary, then each group's flags.
  std::string Help(std::string_view summary) const;
};

// -h, --help: the switch every table answers; Args::Parse stops at it.
const Flag& HelpFlag();

}  // namespace kvserve
