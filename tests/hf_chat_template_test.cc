// The chat template of each family is picked from its model file, and its end-of-turn token ends
// generation: for Llama 3.1 / 3.2 (<|eot_id|>), Qwen 2.5 and 3 (ChatML, <|im_end|>), Gemma 2 and 3
// (<end_of_turn>), Phi-3 / 3.5 (<|end|>) and Mistral (</s>), the real template of
// ../shared/models/chat-templates is put in a GGUF file's tokenizer.chat_template and in a
// Hugging Face folder's tokenizer_config.json, next to the family's real vocabulary (from
// ../shared/models/vocab; Gemma's markers added to a SentencePiece vocabulary). From either file:
// ChatTemplate::ForModel detects the family, the rendered assistant turn ends with the stop text,
// that text encodes to one token, the tokenizer counts that token as end of generation, and the
// engine's StopChecker finishes the turn on it (and, with ignore_eos, does not).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/request.h"
#include "engine/stop_checker.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "io/hf_tokenizer.h"
#include "support/paths.h"
#include "support/safetensors_builder.h"
#include "support/spm_tokenizer_json.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using nlohmann::ordered_json;
using testing::ModelPath;
namespace fs = std::filesystem;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TemplateCase {
  const char* name;      // test name
  const char* vocab;     // under ../shared/models
  const char* jinja;     // under ../shared/models/chat-templates, without .jinja
  const char* family;    // ChatTemplate::name()
  const char* stop;      // the text that ends an assistant turn
  const char* bos_text;  // tokenizer_config.json bos_token
  bool template_list;    // tokenizer_config.json holds [{"name": "default", "template": ...}]
};

const TemplateCase kCases[] = {
    {"Llama31", "vocab/ggml-vocab-llama-bpe.gguf", "meta-llama-Llama-3.1-8B-Instruct", "llama3",
     "<|eot_id|>", "<|begin_of_text|>", false},
    {"Llama32", "vocab/ggml-vocab-llama-bpe.gguf", "meta-llama-Llama-3.2-3B-Instruct", "llama3",
     "<|eot_id|>", "<|begin_of_text|>", true},
    {"Qwen25", "vocab/ggml-vocab-qwen2.gguf", "Qwen-Qwen2.5-7B-Instruct", "chatml", "<|im_end|>",
     "", false},
    {"Gemma2", "", "google-gemma-2-2b-it", "gemma", "<end_of_turn>", "<bos>", false},
    {"Phi35", "vocab/ggml-vocab-phi-3.gguf", "microsoft-Phi-3.5-mini-instruct", "phi3", "<|end|>",
     "<s>", false},
    {"MistralNemo", "ggml-vocab-llama-spm.gguf", "mistralai-Mistral-Nemo-Instruct-2407", "mistral",
     "</s>", "<s>", false},
};

void PrintTo(const TemplateCase& c, std::ostream* os) { *os << c.name; }

// A GGUF image with only tokenizer metadata, and the file parsed from it (which points into it).
struct VocabFile {
  std::vector<uint8_t> image;
  std::unique_ptr<GgufFile> file;
};

std::unique_ptr<VocabFile> Finish(GgufWriter& writer, const std::string& name) {
  auto out = std::make_unique<VocabFile>();
  out->image = writer.Serialize();
  auto file = GgufFile::Parse(out->image.data(), out->image.size(), name);
  EXPECT_TRUE(file.ok()) << file.message();
  if (file.ok()) out->file = std::make_unique<GgufFile>(std::move(file).value());
  return out;
}

// Copies the tokenizer.* keys of `from`, chat_template excepted.
void CopyTokenizerKeys(const GgufFile& from, GgufWriter& w) {
  for (const auto& [key, value] : from.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0 || key == "tokenizer.chat_template") continue;
    switch (value.type) {
      case GgufValueType::kString:
        w.SetString(key, std::string(value.str));
        break;
      case GgufValueType::kUint32:
        w.SetUint32(key, static_cast<uint32_t>(value.u));
        break;
      case GgufValueType::kInt32:
        w.SetInt32(key, static_cast<int32_t>(value.i));
        break;
      case GgufValueType::kBool:
        w.SetBool(key, value.u != 0);
        break;
      case GgufValueType::kFloat32:
        w.SetFloat32(key, static_cast<float>(value.f));
        break;
      case GgufValueType::kArray:
        if (value.array_type == GgufValueType::kString) {
          const auto strings = from.GetStringArray(key).value();
          w.SetStringArray(key, std::vector<std::string>(strings.begin(), strings.end()));
        } else if (value.array_type == GgufValueType::kFloat32) {
          w.SetFloat32Array(key, from.GetFloatArray(key).value());
        } else {
          const auto ints = from.GetIntArray(key).value();
          w.SetInt32Array(key, std::vector<int32_t>(ints.begin(), ints.end()));
        }
        break;
      default:
        ADD_FAILURE() << "unexpected type of " << key;
    }
  }
}

// The family's vocabulary: the real one, or for Gemma the SentencePiece vocabulary of
// ggml-vocab-llama-spm with <bos>, <eos>, <start_of_turn> and <end_of_turn> added as control
// tokens (eos_token_id <eos>, as Gemma files have it).
std::unique_ptr<VocabFile> MakeBaseVocab(const TemplateCase& c) {
  if (std::string(c.vocab).empty()) {
    auto spm = GgufFile::Open(ModelPath("ggml-vocab-llama-spm.gguf"));
    EXPECT_TRUE(spm.ok());
    const auto tokens = spm->GetStringArray("tokenizer.ggml.tokens").value();
    std::vector<std::string> texts(tokens.begin(), tokens.end());
    std::vector<float> scores = spm->GetFloatArray("tokenizer.ggml.scores").value();
    const auto types64 = spm->GetIntArray("tokenizer.ggml.token_type").value();
    std::vector<int32_t> types(types64.begin(), types64.end());
    const uint32_t first = static_cast<uint32_t>(texts.size());
    for (const char* added : {"<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"}) {
      texts.push_back(added);
      scores.push_back(0.0f);
      types.push_back(3);  // CONTROL
    }
    GgufWriter w;
    w.SetString("tokenizer.ggml.model", "llama");
    w.SetString("tokenizer.ggml.pre", "default");
    w.SetStringArray("tokenizer.ggml.tokens", texts);
    w.SetFloat32Array("tokenizer.ggml.scores", scores);
    w.SetInt32Array("tokenizer.ggml.token_type", types);
    w.SetUint32("tokenizer.ggml.bos_token_id", first);
    w.SetUint32("tokenizer.ggml.eos_token_id", first + 1);
    w.SetUint32("tokenizer.ggml.unknown_token_id", 0);
    w.SetBool("tokenizer.ggml.add_bos_token", true);
    w.SetBool("tokenizer.ggml.add_space_prefix", false);
    return Finish(w, "gemma-vocab");
  }
  auto real = GgufFile::Open(ModelPath(c.vocab));
  EXPECT_TRUE(real.ok()) << c.vocab;
  GgufWriter w;
  CopyTokenizerKeys(*real, w);
  return Finish(w, c.vocab);
}

// MakeBaseVocab of `c`, made once per test process (the Llama 3 vocabulary is large).
const VocabFile& BaseVocab(const TemplateCase& c) {
  static std::map<std::string, std::unique_ptr<VocabFile>> cache;
  std::unique_ptr<VocabFile>& slot = cache[c.vocab];
  if (slot == nullptr) slot = MakeBaseVocab(c);
  return *slot;
}

// The family's GGUF: its vocabulary and, as tokenizer.chat_template, the real template.
std::unique_ptr<VocabFile> GgufOf(const TemplateCase& c) {
  GgufWriter w;
  CopyTokenizerKeys(*BaseVocab(c).file, w);
  w.SetString("tokenizer.chat_template",
              ReadText(ModelPath(std::string("chat-templates/") + c.jinja + ".jinja")));
  return Finish(w, std::string(c.name) + ".gguf");
}

// tokenizer.json of a byte-level BPE vocabulary (Llama 3, Qwen): vocab by id, the merges, the
// control and user-defined tokens as added tokens.
nlohmann::json BpeTokenizerJson(const GgufFile& gguf) {
  const auto tokens = gguf.GetStringArray("tokenizer.ggml.tokens").value();
  const auto types = gguf.GetIntArray("tokenizer.ggml.token_type").value();
  const auto merges = gguf.GetStringArray("tokenizer.ggml.merges").value();
  nlohmann::json vocab = nlohmann::json::object();  // std::map: ordered_json inserts in O(n)
  nlohmann::json added = nlohmann::json::array();
  for (size_t id = 0; id < tokens.size(); ++id) {
    vocab[std::string(tokens[id])] = id;
    if (types[id] == 3 || types[id] == 4) {
      added.push_back(
          {{"id", id}, {"content", std::string(tokens[id])}, {"special", types[id] == 3}});
    }
  }
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"vocab", vocab},
        {"merges", std::vector<std::string>(merges.begin(), merges.end())}}},
  };
}

// A Hugging Face tokenizer folder of the family: tokenizer.json from its vocabulary, and
// tokenizer_config.json with the real template and the family's bos/eos texts.
std::string FolderOf(const TemplateCase& c) {
  const std::string dir = testing::TempDir() + "/hf-chat-" + c.name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  const GgufFile& vocab = *BaseVocab(c).file;
  nlohmann::json tokenizer = vocab.GetString("tokenizer.ggml.model").value() == "gpt2"
                                 ? BpeTokenizerJson(vocab)
                                 : nlohmann::json(testing::SpmTokenizerJson(vocab));
  // The stop token is special in the real tokenizer.json (added_tokens, "special": true).
  const auto tokens = vocab.GetStringArray("tokenizer.ggml.tokens").value();
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id] != c.stop) continue;
    bool listed = false;
    for (auto& entry : tokenizer["added_tokens"]) {
      if (entry["id"] == id) {
        entry["special"] = true;
        listed = true;
      }
    }
    if (!listed)
      tokenizer["added_tokens"].push_back({{"id", id}, {"content", c.stop}, {"special", true}});
  }
  EXPECT_TRUE(testing::WriteText(dir + "/tokenizer.json", tokenizer.dump()));
  const std::string jinja =
      ReadText(ModelPath(std::string("chat-templates/") + c.jinja + ".jinja"));
  const int64_t eos = vocab.GetUint("tokenizer.ggml.eos_token_id").value();
  ordered_json config = {
      {"eos_token", std::string(tokens[static_cast<size_t>(eos)])},
      {"add_bos_token", vocab.GetBoolOr("tokenizer.ggml.add_bos_token", false).value()},
      {"chat_template", jinja},
  };
  if (std::string(c.bos_text) != "") config["bos_token"] = c.bos_text;
  if (c.template_list) {
    config["chat_template"] =
        ordered_json::array({{{"name", "default"}, {"template", jinja}},
                             {{"name", "tool_use"}, {"template", "{{ 'not this one' }}"}}});
  }
  EXPECT_TRUE(testing::WriteText(dir + "/tokenizer_config.json", config.dump(2)));
  return dir;
}

// The tokenizer metadata HfTokenizer makes of the family's folder, as a GGUF.
std::unique_ptr<VocabFile> HfViewOf(const TemplateCase& c) {
  const std::string dir = FolderOf(c);
  const int n_vocab =
      static_cast<int>(BaseVocab(c).file->GetStringArray("tokenizer.ggml.tokens")->size());
  auto hf = HfTokenizer::LoadFolder(dir, {.n_vocab = n_vocab});
  EXPECT_TRUE(hf.ok()) << hf.message();
  GgufWriter w;
  if (hf.ok()) hf->AddTo(w);
  fs::remove_all(dir);
  return Finish(w, dir);
}

// The checks of the file header: template picked, turn ended by the stop token.
void ExpectTemplateAndStop(const TemplateCase& c, const GgufFile& file) {
  auto tmpl = ChatTemplate::ForModel(file, "");
  ASSERT_TRUE(tmpl.ok()) << tmpl.message();
  EXPECT_EQ(tmpl->name(), c.family);
  EXPECT_EQ(tmpl->warning(), "");
  auto tokenizer = Tokenizer::FromGguf(file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const Tokenizer& tok = **tokenizer;

  // The assistant's turn ends with the stop text, and the stop text is one token.
  const std::vector<ChatMessage> conversation = {
      {"user", "Hello!"}, {"assistant", "Hi there."}, {"user", "What is 2+2?"}};
  const std::string rendered = tmpl->Render(conversation, true);
  EXPECT_NE(rendered.find(std::string("Hi there.") + c.stop), std::string::npos) << rendered;
  const std::vector<int32_t> stop_ids = tok.Encode(c.stop, false, true);
  ASSERT_EQ(stop_ids.size(), 1u) << c.stop;
  const int32_t stop = stop_ids[0];
  EXPECT_EQ(tok.TokenPiece(stop, true), c.stop);
  EXPECT_TRUE(tok.IsEndOfGeneration(stop)) << c.stop;
  const std::vector<int32_t> prompt = tmpl->EncodePrompt(tok, rendered);
  EXPECT_NE(std::find(prompt.begin(), prompt.end(), stop), prompt.end())
      << "the rendered prompt does not hold " << c.stop << " as its token";
  const auto& stops = tmpl->stop_strings();
  EXPECT_NE(std::find(stops.begin(), stops.end(), c.stop), stops.end()) << c.stop;

  // The engine's stop rules: the stop token finishes the turn and is not emitted; a plain
  // token does not; with ignore_eos the stop token is just text.
  const int32_t plain = tok.Encode("Hi", false, false).at(0);
  EXPECT_FALSE(tok.IsEndOfGeneration(plain));
  Request request;
  request.max_tokens = 8;
  StopChecker checker(request, tok, 512);
  const StopChecker::Outcome first = checker.Push(plain, 0, 20);
  EXPECT_TRUE(first.append);
  EXPECT_EQ(first.finish, FinishReason::kNone);
  const StopChecker::Outcome end = checker.Push(stop, 1, 21);
  EXPECT_FALSE(end.append);
  EXPECT_EQ(end.finish, FinishReason::kStop);
  request.ignore_eos = true;
  StopChecker ignoring(request, tok, 512);
  EXPECT_EQ(ignoring.Push(stop, 0, 20).finish, FinishReason::kNone);
}

class ChatTemplateFileTest : public ::testing::TestWithParam<TemplateCase> {};

TEST_P(ChatTemplateFileTest, GgufPicksTheTemplateAndItsStopTokenEndsTheTurn) {
  auto gguf = GgufOf(GetParam());
  ASSERT_NE(gguf->file, nullptr);
  ExpectTemplateAndStop(GetParam(), *gguf->file);
}

TEST_P(ChatTemplateFileTest, HfFolderPicksTheTemplateAndItsStopTokenEndsTheTurn) {
  auto view = HfViewOf(GetParam());
  ASSERT_NE(view->file, nullptr);
  EXPECT_EQ(view->file->GetString("tokenizer.chat_template").value(),
            ReadText(ModelPath(std::string("chat-templates/") + GetParam().jinja + ".jinja")));
  ExpectTemplateAndStop(GetParam(), *view->file);
}

INSTANTIATE_TEST_SUITE_P(Families, ChatTemplateFileTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Without a template in the file, the conversation is plain text and only the vocabulary's own
// end-of-generation tokens stop it; an override name wins over the file's template.
TEST(ChatTemplateFileTest, OverrideAndAbsentTemplate) {
  auto plain = ChatTemplate::ForModel(*BaseVocab(kCases[0]).file, "");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->name(), "plain");
  auto gguf = GgufOf(kCases[0]);
  auto chosen = ChatTemplate::ForModel(*gguf->file, "chatml");
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->name(), "chatml");
}

}  // namespace
}  // namespace kvserve
