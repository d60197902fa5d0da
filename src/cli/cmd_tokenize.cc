// `kvserve tokenize -m MODEL (--text T | --text-file F) [--add-special] [--parse-special]
// [--pieces]`: prints the token ids of a text on one line, separated by spaces, or with --pieces
// one "id<TAB>piece" line per token (the piece C-escaped: \n, \t, \\, \xNN for other control
// bytes and for bytes that are not complete UTF-8).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "io/gguf_reader.h"
#include "model/hf_folder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace kvserve {

FlagTable TokenizeFlagTable() {
  return {
      .usage = "tokenize -m MODEL (--text TEXT | --text-file FILE) [flags]",
      .groups = {{"tokenize",
                  {{.name = "--model",
                    .alias = "-m",
                    .value_name = "PATH",
                    .help = "GGUF file or Hugging Face folder whose tokenizer to use (required)"},
                   {.name = "--text", .alias = "-t", .value_name = "TEXT", .help = "the text"},
                   {.name = "--text-file",
                    .value_name = "FILE",
                    .help = "read the text from FILE, bytes as they are"},
                   {.name = "--add-special", .help = "add the model's BOS/EOS tokens"},
                   {.name = "--parse-special",
                    .help = "read special-token text in the input (like <s>) as those tokens"},
                   {.name = "--pieces",
                    .help = "print one line per token: id, a tab, the C-escaped piece"}}}}};
}

namespace {

std::string EscapePiece(std::string_view piece) {
  std::string out;
  size_t offset = 0;
  while (offset < piece.size()) {
    const unsigned char c = static_cast<unsigned char>(piece[offset]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      const size_t length = c >= 0x80 ? DecodeUtf8(piece.substr(offset)) : 0;
      if (length > 0) {
        out.append(piece.substr(offset, length));
        offset += length;
        continue;
      }
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
    ++offset;
  }
  return out;
}

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "kvserve tokenize: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunTokenize(const std::vector<std::string>& argv) {
  auto args = Args::Parse(argv, TokenizeFlagTable());
  if (!args.ok()) return Fail(args.message(), 2);
  const std::string usage =
      "usage: kvserve tokenize -m MODEL (--text T | --text-file F) [--add-special] "
      "[--parse-special] [--pieces]";
  if (!args->positional().empty()) {
    return Fail("unexpected argument '" + args->positional()[0] + "'; " + usage, 2);
  }
  const std::string path = args->GetOr("--model", "");
  if (path.empty()) return Fail("missing --model; " + usage, 2);
  if (args->Has("--text") == args->Has("--text-file")) {
    return Fail("give exactly one of --text or --text-file; " + usage, 2);
  }
  std::string text;
  if (args->Has("--text")) {
    text = *args->Get("--text");
  } else {
    const std::string text_path = *args->Get("--text-file");
    std::ifstream in(text_path, std::ios::binary);
    if (!in) return Fail("--text-file: cannot open '" + text_path + "'", 1);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) return Fail("--text-file: cannot read '" + text_path + "'", 1);
    text = buffer.str();
  }

  auto file = HfFolder::IsFolder(path) ? HfFolder::Open(path) : GgufFile::Open(path);
  if (!file.ok()) return Fail(file.message(), 1);
  auto tokenizer = Tokenizer::FromGguf(*file);
  if (!tokenizer.ok()) return Fail(path + ": " + tokenizer.message(), 1);

  const std::vector<int32_t> ids =
      (*tokenizer)->Encode(text, args->Has("--add-special"), args->Has("--parse-special"));
  std::string out;
  if (args->Has("--pieces")) {
    for (int32_t id : ids) {
      out += std::to_string(id) + "\t" +
             EscapePiece((*tokenizer)->TokenPiece(id, /*render_special=*/true)) + "\n";
    }
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += std::to_string(ids[i]);
    }
    out.push_back('\n');
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace kvserve
