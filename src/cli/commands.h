// The `kvserve` subcommands. Each has its own cmd_*.cc with two functions: its flag table (what it
// parses and what `kvserve COMMAND --help` prints) and its body, which takes the words after the
// subcommand name and returns the process exit code.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flag_table.h"

namespace kvserve {

struct Command {
  const char* name;
  const char* summary;  // one line, for the usage list and the top of --help
  FlagTable (*flags)();
  int (*run)(const std::vector<std::string>& args);
};

// In the order `kvserve` lists them.
std::span<const Command> Commands();
// nullptr when `name` is no command.
const Command* FindCommand(std::string_view name);

FlagTable InfoFlagTable();
int RunInfo(const std::vector<std::string>& args);
FlagTable RunFlagTable();
int RunGenerate(const std::vector<std::string>& args);  // `kvserve run`
FlagTable ChatFlagTable();
int RunChat(const std::vector<std::string>& args);
FlagTable LogitsFlagTable();
int RunLogits(const std::vector<std::string>& args);
FlagTable TokenizeFlagTable();
int RunTokenize(const std::vector<std::string>& args);
FlagTable EmbedFlagTable();
int RunEmbed(const std::vector<std::string>& args);
FlagTable ConvertFlagTable();
int RunConvert(const std::vector<std::string>& args);
FlagTable SynthFlagTable();
int RunSynth(const std::vector<std::string>& args);
FlagTable DoctorFlagTable();
int RunDoctor(const std::vector<std::string>& args);
FlagTable BenchFlagTable();
int RunBench(const std::vector<std::string>& args);
FlagTable ServeFlagTable();
int RunServe(const std::vector<std::string>& args);  // `kvserve serve`
FlagTable VersionFlagTable();
int RunVersion(const std::vector<std::string>& args);  // `kvserve version`, `kvserve --version`

// "kvserve 0.1.0 (commit 1a2b3c4, kernels avx2)": the project version, the git commit of the
// build ("unknown" outside a checkout) and the kernel table this process uses.
std::string VersionLine();

}  // namespace kvserve
