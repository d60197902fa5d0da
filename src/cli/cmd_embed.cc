// `kvserve embed -m MODEL (-p TEXT | -f FILE) [--pooling P] [--embd-normalize N]
// [--embd-separator S] [--output-format text|json]`: embeddings of each input (the text split at
// the separator, a newline by default, as llama-embedding splits it), tokenized with the model's
// special tokens and special-token text read. text: one line per vector, its floats separated by
// spaces (%.9g, which reads back to the same float); json: /v1/embeddings' response.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "cli/pooling_flag.h"
#include "engine/embedder.h"
#include "server/embeddings_route.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

FlagTable EmbedFlagTable() {
  return {
      .usage = "embed -m MODEL (-p TEXT | -f FILE) [flags]",
      .groups = {{"embed",
                  {{.name = "--prompt", .alias = "-p", .value_name = "TEXT", .help = "the text"},
                   {.name = "--file",
                    .alias = "-f",
                    .value_name = "FILE",
                    .help = "read the text from FILE"},
                   {.name = "--embd-separator",
                    .value_name = "TEXT",
                    .default_text = "a newline",
                    .help = "splits the text into inputs, one vector each"},
                   {.name = "--embd-normalize",
                    .value_name = "N",
                    .default_text = "2",
                    .help = "-1 none, 0 max-abs to int16, 1 taxicab, 2 euclidean, p-norm"},
                   {.name = "--output-format",
                    .value_name = "FORMAT",
                    .default_text = "text",
                    .help = "text (a line per vector) or json (/v1/embeddings' answer)"}}},
                 PoolingFlag(),
                 ModelFlags()}};
}

namespace {

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve embed: %s\n", message.c_str());
  return code;
}

Result<std::string> ReadText(const Args& args) {
  if (args.Has("--prompt") == args.Has("--file")) {
    return Status::InvalidArgument("give exactly one of --prompt or --file");
  }
  if (args.Has("--prompt")) return *args.Get("--prompt");
  const std::string path = *args.Get("--file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("flag --file: cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The text's pieces between separators, empty ones dropped (a trailing newline makes none).
std::vector<std::string> Split(const std::string& text, const std::string& separator) {
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = separator.empty() ? std::string::npos : text.find(separator, start);
    const std::string piece = text.substr(start, end == std::string::npos ? end : end - start);
    if (!piece.empty()) pieces.push_back(piece);
    if (end == std::string::npos) break;
    start = end + separator.size();
  }
  return pieces;
}

void PrintText(const Embeddings& embeddings) {
  for (const std::vector<float>& v : embeddings.vectors) {
    std::string line;
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
      std::snprintf(buf, sizeof(buf), i == 0 ? "%.9g" : " %.9g", v[i]);
      line += buf;
    }
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int RunEmbed(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, EmbedFlagTable());
  if (!args.ok()) return Fail(args.message(), 2);
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'", 2);
  }
  auto options = ReadModelOptions(*args);
  if (!options.ok()) return Fail(options.message(), 2);
  auto text = ReadText(*args);
  if (!text.ok()) return Fail(text.message(), 2);
  auto normalize = args->GetInt("--embd-normalize", 2);
  if (!normalize.ok()) return Fail(normalize.message(), 2);
  if (Status ok = CheckNormalize(static_cast<int>(*normalize), "flag --embd-normalize"); !ok.ok())
    return Fail(ok.message(), 2);
  const std::string format = args->GetOr("--output-format", "text");
  if (format != "text" && format != "json") {
    return Fail("flag --output-format: '" + format + "' is not text or json", 2);
  }
  auto model = OpenModel(*options);
  if (!model.ok()) return Fail(model.message(), 1);
  auto pooling = ReadPooling(*args, **model);
  if (!pooling.ok()) return Fail(pooling.message(), 2);
  auto tokenizer = Tokenizer::FromGguf((*model)->file());
  if (!tokenizer.ok()) return Fail(tokenizer.message(), 1);
  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& piece : Split(*text, args->GetOr("--embd-separator", "\n"))) {
    inputs.push_back((*tokenizer)->Encode(piece, /*add_special=*/true, /*parse_special=*/true));
  }
  Embedder embedder(**model, options->n_threads, options->n_ctx, 512);
  auto embeddings =
      embedder.Run(inputs, {.pooling = *pooling, .normalize = static_cast<int>(*normalize)});
  if (!embeddings.ok()) return Fail(embeddings.message(), 1);
  if (format == "json") {
    const nlohmann::json out = EmbeddingsJson(*embeddings, options->model_path, false);
    std::printf("%s\n", out.dump().c_str());
  } else {
    PrintText(*embeddings);
  }
  return 0;
}

}  // namespace kvserve
