// Writes llama.cpp's tokenization of every input of inputs.json with a t5-model (unigram)
// vocabulary (a file tests/t5_tokenizer_test.cc builds from vocab-*.json, see README.md), as
// reference-*.json:
//   {"llama_cpp_commit", "vocab_sha256" (copied from the command line), "n_vocab",
//    "cases": [{"name", "ids", "ids_parse_special" (or "ids_parse_special_same": true),
//               "ids_no_special" (or "ids_no_special_same": true), "text", "text_special",
//               "text_parse", "text_parse_special" (only when ids_parse_special differs),
//               "detokenized" (or "detokenized_same": true)}]}
// ids: llama_tokenize(add_special = true, parse_special = false); ids_parse_special: the same
// with parse_special = true; ids_no_special: add_special = false, parse_special = false, written
// only when it is not `ids` less the BOS/EOS that add_special added (llama_vocab_get_add_bos/eos),
// else ids_no_special_same. text: llama_token_to_piece(special = false, lstrip 0) of each id of
// `ids`, concatenated (what a server streams); text_special: the same with special = true;
// text_parse and text_parse_special: the same two over ids_parse_special; detokenized:
// llama_detokenize(ids, remove_special false, unparse_special false), which drops one leading
// space of the first piece when the file has add_space_prefix, written when it is not `text`. Each text is written as an edit
// of the input (Edit below), byte for byte.
//
// Our program, built against a llama.cpp checkout beside the project (never part of the build):
//   c++ -std=c++17 -O2 make_reference.cc -I$LLAMA/include -I$LLAMA/ggml/include \
//       -L$LLAMA/build-zen4/bin -lllama -lggml -lggml-base -Wl,-rpath,$LLAMA/build-zen4/bin \
//       -o /tmp/make_t5_reference
//   /tmp/make_t5_reference VOCAB.gguf VOCAB_SHA256 inputs.json ../ reference.json
// The last-but-one argument is the folder that "file" inputs are relative to (tests/data).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "llama.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::string FromHex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

std::vector<llama_token> Tokenize(const llama_vocab* vocab, const std::string& text,
                                  bool parse_special, bool add_special = true) {
  std::vector<llama_token> ids(text.size() + 8);
  int n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                         static_cast<int32_t>(ids.size()), add_special, parse_special);
  if (n < 0) {
    ids.resize(static_cast<size_t>(-n));
    n = llama_tokenize(vocab, text.data(), static_cast<int32_t>(text.size()), ids.data(),
                       static_cast<int32_t>(ids.size()), add_special, parse_special);
  }
  ids.resize(static_cast<size_t>(n));
  return ids;
}

std::string Pieces(const llama_vocab* vocab, const std::vector<llama_token>& ids, bool special) {
  std::string out;
  char buf[256];
  for (llama_token id : ids) {
    const int n = llama_token_to_piece(vocab, id, buf, sizeof(buf), 0, special);
    if (n < 0) {
      std::fprintf(stderr, "piece of %d longer than %zu\n", id, sizeof(buf));
      std::exit(1);
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

std::string Detokenize(const llama_vocab* vocab, const std::vector<llama_token>& ids) {
  std::string out(ids.size() * 64 + 16, '\0');
  const int n = llama_detokenize(vocab, ids.data(), static_cast<int32_t>(ids.size()), out.data(),
                                 static_cast<int32_t>(out.size()), false, false);
  if (n < 0) {
    std::fprintf(stderr, "detokenize: buffer too small\n");
    std::exit(1);
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

// `text` as an edit of `input`: {"head": h, "tail": t, "middle"}, meaning the first h bytes of
// the input, then the middle bytes, then the last t bytes of the input. The middle is written as
// a JSON string when it is valid UTF-8, else as "middle_hex".
nlohmann::ordered_json Edit(const std::string& text, const std::string& input) {
  size_t head = 0;
  while (head < text.size() && head < input.size() && text[head] == input[head]) ++head;
  size_t tail = 0;
  while (tail + head < text.size() && tail + head < input.size() &&
         text[text.size() - 1 - tail] == input[input.size() - 1 - tail]) {
    ++tail;
  }
  nlohmann::ordered_json edit;
  edit["head"] = head;
  edit["tail"] = tail;
  const std::string middle = text.substr(head, text.size() - head - tail);
  try {
    (void)nlohmann::json(middle).dump();  // throws on invalid UTF-8
    edit["middle"] = middle;
  } catch (const nlohmann::json::exception&) {
    edit["middle_hex"] = Hex(middle);
  }
  return edit;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s VOCAB VOCAB_SHA256 INPUTS.json DATA_DIR OUT.json\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.vocab_only = true;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (model == nullptr) return 1;
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const auto inputs = nlohmann::json::parse(ReadFile(argv[3]));
  nlohmann::ordered_json out;
  out["llama_cpp_commit"] = "3f545beccee69d9975f466ec7e45fd9aacd8ba90";
  out["vocab_sha256"] = argv[2];
  out["n_vocab"] = llama_vocab_n_tokens(vocab);
  out["cases"] = nlohmann::ordered_json::array();
  size_t n_ids = 0;
  for (const auto& input : inputs) {
    std::string text;
    if (input.contains("text")) text = input["text"].get<std::string>();
    if (input.contains("hex")) text = FromHex(input["hex"].get<std::string>());
    if (input.contains("file"))
      text = ReadFile(std::string(argv[4]) + "/" + input["file"].get<std::string>());
    const auto ids = Tokenize(vocab, text, false);
    const auto ids_special = Tokenize(vocab, text, true);
    n_ids += ids.size() + ids_special.size();
    nlohmann::ordered_json item;
    item["name"] = input["name"];
    item["ids"] = ids;
    if (ids_special == ids) {
      item["ids_parse_special_same"] = true;
    } else {
      item["ids_parse_special"] = ids_special;
    }
    const auto ids_no_special = Tokenize(vocab, text, false, false);
    std::vector<llama_token> less_added = ids;
    if (llama_vocab_get_add_eos(vocab) && !less_added.empty()) less_added.pop_back();
    if (llama_vocab_get_add_bos(vocab) && !less_added.empty()) less_added.erase(less_added.begin());
    if (ids_no_special == less_added) {
      item["ids_no_special_same"] = true;
    } else {
      item["ids_no_special"] = ids_no_special;
    }
    const std::string pieces = Pieces(vocab, ids, false);
    item["text"] = Edit(pieces, text);
    item["text_special"] = Edit(Pieces(vocab, ids, true), text);
    if (ids_special != ids) {
      item["text_parse"] = Edit(Pieces(vocab, ids_special, false), text);
      item["text_parse_special"] = Edit(Pieces(vocab, ids_special, true), text);
    }
    const std::string detokenized = Detokenize(vocab, ids);
    if (detokenized == pieces) {
      item["detokenized_same"] = true;
    } else {
      item["detokenized"] = Edit(detokenized, text);
    }
    out["cases"].push_back(item);
  }
  // One case a line, so that a change shows as the lines of the cases it touches.
  std::ofstream file(argv[5]);
  file << "{\"llama_cpp_commit\": " << out["llama_cpp_commit"].dump()
       << ",\n \"vocab_sha256\": " << out["vocab_sha256"].dump()
       << ",\n \"n_vocab\": " << out["n_vocab"].dump() << ",\n \"cases\": [\n";
  for (size_t i = 0; i < out["cases"].size(); ++i) {
    file << "  " << out["cases"][i].dump() << (i + 1 < out["cases"].size() ? ",\n" : "\n");
  }
  file << " ]}\n";
  std::fprintf(stderr, "%zu inputs, %zu ids\n", inputs.size(), n_ids);
  llama_model_free(model);
  return 0;
}
