#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/suggestion.h"

namespace {

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: kvserve COMMAND [flags]\n\ncommands:\n");
  for (const kvserve::Command& command : kvserve::Commands()) {
    std::fprintf(out, "  %-10s %s\n", command.name, command.summary);
  }
  std::fprintf(out,
               "\n`kvserve COMMAND --help` lists a command's flags; `kvserve --version` prints "
               "the version.\n");
}

// What a mistyped first word was likely meant to be: a command, or a flag of `kvserve` itself
// (the flags first when the word is one, since dashes do not count in the distance).
std::string Suggestion(const std::string& word) {
  std::vector<std::string> commands, flags = {"--help", "-h", "--version"};
  for (const kvserve::Command& command : kvserve::Commands()) commands.push_back(command.name);
  std::vector<std::string> names = word[0] == '-' ? flags : commands;
  const std::vector<std::string>& rest = word[0] == '-' ? commands : flags;
  names.insert(names.end(), rest.begin(), rest.end());
  return kvserve::DidYouMean(word, names);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "--version") name = "version";
  const kvserve::Command* command = kvserve::FindCommand(name);
  if (command == nullptr) {
    std::fprintf(stderr, "kvserve: unknown %s '%s'%s\n", name[0] == '-' ? "flag" : "command",
                 name.c_str(), Suggestion(name).c_str());
    PrintUsage(stderr);
    return 2;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  // Help is answered here, from the table the command parses with; anything else, errors
  // included, is the command's to report.
  const kvserve::FlagTable flags = command->flags();
  if (auto parsed = kvserve::Args::Parse(args, flags); parsed.ok() && parsed->help_requested()) {
    std::fputs(flags.Help(command->summary).c_str(), stdout);
    return 0;
  }
  return command->run(args);
}
