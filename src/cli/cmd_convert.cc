// `kvserve convert -m IN.gguf -o OUT.gguf --type TYPE` (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0,
// q5_1, iq4_nl, mxfp4, q2_k, q3_k, q4_k, q5_k, q6_k, or a recipe): rewrites a model's
// weight matrices in another type (rules in model/gguf_converter.h).
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/gguf_converter.h"
#include "model/hf_folder.h"
#include "model/quant_recipe.h"

namespace kvserve {

namespace {

constexpr const char* kUsage =
    "usage: kvserve convert -m IN.gguf|HF_FOLDER -o OUT.gguf --type "
    "f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|iq4_nl|mxfp4|mxfp4_moe|q2_k..q6_k";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve convert: %s\n", message.c_str());
  return code;
}

}  // namespace

FlagTable ConvertFlagTable() {
  return {.usage = "convert -m IN.gguf|HF_FOLDER -o OUT.gguf --type TYPE",
          .groups = {{"convert",
                      {{.name = "--model",
                        .alias = "-m",
                        .value_name = "PATH",
                        .help = "the model to read: GGUF file or Hugging Face folder (required)"},
                       {.name = "--output",
                        .alias = "-o",
                        .value_name = "FILE",
                        .help = "the GGUF file to write (required)"},
                       {.name = "--type",
                        .alias = "-t",
                        .value_name = "TYPE",
                        .help = "weight type or llama.cpp recipe: f32, f16, bf16, q8_0, q4_0, "
                                "q4_1, q5_0, q5_1, iq4_nl, q2_k, q3_k_s, q3_k_m, q3_k_l, q4_k_s, "
                                "q4_k_m, q5_k_s, q5_k_m, q6_k, mxfp4_moe (experts in MXFP4, "
                                "the rest Q8_0), or every matrix in one type: q3_k, q4_k, q5_k, "
                                "mxfp4 (required)"}}}}};
}

int RunConvert(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, ConvertFlagTable());
  if (!args.ok()) return Fail(args.message() + "; " + kUsage, 2);
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'; " + kUsage, 2);
  }
  const std::string in_path = args->GetOr("--model", "");
  const std::string out_path = args->GetOr("--output", "");
  const std::string type_name = args->GetOr("--type", "");
  if (in_path.empty() || out_path.empty() || type_name.empty()) return Fail(kUsage, 2);
  const auto recipe = QuantRecipe::Find(type_name);
  if (!recipe.ok()) return Fail(recipe.message(), 2);

  auto source = HfFolder::IsFolder(in_path) ? HfFolder::Open(in_path) : GgufFile::Open(in_path);
  if (!source.ok()) return Fail(source.message(), 1);
  auto converter = GgufConverter::Create(*source, *recipe);
  if (!converter.ok()) return Fail(converter.message(), 1);
  for (const std::string& note : converter->Notes()) {
    std::fprintf(stderr, "kvserve convert: %s\n", note.c_str());
  }
  const Status written = converter->WriteFile(out_path);
  if (!written.ok()) return Fail(written.message(), 1);

  uint64_t in_bytes = 0;
  for (const TensorInfo& tensor : source->tensors()) in_bytes += tensor.n_bytes;
  std::printf("%s -> %s (%s): %zu tensors, weights %.2f MiB -> %.2f MiB, %zu in a fallback type\n",
              in_path.c_str(), out_path.c_str(), recipe->name().c_str(), converter->plan().size(),
              in_bytes / 1048576.0, converter->OutputTensorBytes() / 1048576.0,
              converter->Notes().size());
  return 0;
}

}  // namespace kvserve
