#include "cli/commands.h"

namespace kvserve {

namespace {

const Command kCommands[] = {
    {"run", "generate text from a prompt", RunFlagTable, RunGenerate},
    {"chat", "chat with a model in the terminal (user lines from stdin; /exit or EOF ends)",
     ChatFlagTable, RunChat},
    {"logits", "write the logits of a token sequence to a file", LogitsFlagTable, RunLogits},
    {"tokenize", "print the token ids of a text", TokenizeFlagTable, RunTokenize},
    {"embed", "print the embeddings of texts (t5encoder and t5 files)", EmbedFlagTable, RunEmbed},
    {"info", "describe a model file: architecture, shapes, types, KV size", InfoFlagTable, RunInfo},
    {"convert", "write a model as GGUF with another weight type", ConvertFlagTable, RunConvert},
    {"synth", "write a random-weight model of a real shape", SynthFlagTable, RunSynth},
    {"doctor", "describe this machine: CPU, ISA, memory bandwidth, matmul rate", DoctorFlagTable,
     RunDoctor},
    {"bench", "measure prefill/decode speed, engine throughput, or cache against no cache",
     BenchFlagTable, RunBench},
    {"serve", "OpenAI-compatible HTTP server", ServeFlagTable, RunServe},
    {"version", "print the version, the git commit and the kernel ISA", VersionFlagTable,
     RunVersion},
};

}  // namespace

std::span<const Command> Commands() { return kCommands; }

const Command* FindCommand(std::string_view name) {
  for (const Command& command : kCommands) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

}  // namespace kvserve
