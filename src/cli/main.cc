#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>& args);
  const char* summary;
};

const Command kCommands[] = {
    {"run", kvserve::RunGenerate, "generate text from a prompt (-m MODEL -p TEXT -n N)"},
    {"chat", kvserve::RunChat, "chat with a model in the terminal (-m MODEL; lines from stdin)"},
    {"logits", kvserve::RunLogits, "write the logits of a token sequence to a file"},
    {"tokenize", kvserve::RunTokenize, "print the token ids of a text"},
    {"info", kvserve::RunInfo, "describe a model file: architecture, shapes, types, KV size"},
    {"convert", kvserve::RunConvert, "write a model as GGUF with another weight type"},
    {"synth", kvserve::RunSynth, "write a random-weight model (--preset gpt2-124m|tinyllama-1.1b)"},
    {"doctor", kvserve::RunDoctor,
     "describe this machine: CPU, ISA, memory bandwidth, matmul rate"},
    {"bench", kvserve::RunBench, "measure prefill/decode speed (-p 512 -n 128) or --cache-compare"},
    {"serve", kvserve::RunServe, "OpenAI-compatible HTTP server (-m MODEL --port 8080)"},
};

void PrintUsage() {
  std::fprintf(stderr, "usage: kvserve COMMAND [options]\n\ncommands:\n");
  for (const Command& command : kCommands) {
    std::fprintf(stderr, "  %-10s %s\n", command.name, command.summary);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage();
    return argc < 2 ? 2 : 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& command : kCommands) {
    if (std::strcmp(argv[1], command.name) == 0) return command.run(args);
  }
  std::fprintf(stderr, "kvserve: unknown command '%s'\n", argv[1]);
  PrintUsage();
  return 2;
}
