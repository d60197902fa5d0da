// One function per `kvserve` subcommand, each in its own cmd_*.cc. They take the words after the
// subcommand name and return the process exit code.
#pragma once

#include <string>
#include <vector>

namespace kvserve {

int RunInfo(const std::vector<std::string>& args);
int RunGenerate(const std::vector<std::string>& args);  // `kvserve run`
int RunChat(const std::vector<std::string>& args);
int RunLogits(const std::vector<std::string>& args);
int RunTokenize(const std::vector<std::string>& args);
int RunConvert(const std::vector<std::string>& args);
int RunSynth(const std::vector<std::string>& args);
int RunDoctor(const std::vector<std::string>& args);
int RunBench(const std::vector<std::string>& args);
int RunServe(const std::vector<std::string>& args);  // `kvserve serve`

}  // namespace kvserve
