// libFuzzer harness for what the server does with a request before the engine sees it. For any
// input bytes:
// - ScanRequestHead (the HTTP head) ends inside the input, within its limits, or refuses with 431
//   (414 for the request line); CheckRequestHead refuses a complete head with 400/411/501 or
//   gives one framing, and ChunkedBodyCheck gives the same verdict on the bytes after it however
//   they are split;
// - ParseJsonBody either refuses them with a 4xx whose body is valid JSON, or gives an object;
// - ParseCompletionRequest of that object, as /v1/completions and as /v1/chat/completions, either
//   refuses it (a 4xx naming a parameter in valid JSON) or gives a request within every limit
//   (choices, prompts, stop strings, logprobs, sampling ranges, token ids inside the vocabulary);
// - with KVSERVE_FUZZ_MODEL set to a GGUF file, the accepted prompts are tokenized (text) or
//   rendered by every chat template and tokenized (chat), and every id is inside the vocabulary;
//   the request's tools are rendered too by every template whose CheckToolUse accepts them;
// - the Anthropic (/v1/messages) and Responses (/v1/responses) translations of that object either
//   refuse it (a 4xx naming the field, in its message) or give a chat body that
//   ParseCompletionRequest refuses or accepts as above; the response shell is always an object.
// Any violation aborts. Build: scripts/fuzz.sh configures build-fuzz/; then
//   ninja -C build-fuzz request_fuzz && build-fuzz/fuzz/request_fuzz -max_total_time=60
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_reader.h"
#include "server/anthropic_messages.h"
#include "server/completion_request.h"
#include "server/http_framing.h"
#include "server/request_limits.h"
#include "server/responses_api.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace {

using kvserve::ApiError;
using kvserve::CompletionKind;
using kvserve::CompletionRequest;

void Check(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "request_fuzz: invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

void CheckError(const ApiError& error) {
  Check(error.http_status >= 400 && error.http_status < 500, "a 4xx",
        std::to_string(error.http_status));
  Check(!error.message.empty(), "a message");
  const auto body = nlohmann::json::parse(error.Body(), nullptr, /*allow_exceptions=*/false);
  Check(body.is_object() && body.contains("error") && body["error"]["message"].is_string(),
        "error body is OpenAI-shaped JSON", error.Body().substr(0, 200));
}

struct Vocabulary {
  std::unique_ptr<kvserve::GgufFile> file;
  std::unique_ptr<kvserve::Tokenizer> tokenizer;
  std::vector<kvserve::ChatTemplate> templates;
  int n_vocab = 512;
};

const Vocabulary& Vocab() {
  static const Vocabulary* vocab = [] {
    auto* v = new Vocabulary;
    const char* path = std::getenv("KVSERVE_FUZZ_MODEL");
    if (path != nullptr && *path != '\0') {
      auto file = kvserve::GgufFile::Open(path);
      Check(file.ok(), "KVSERVE_FUZZ_MODEL opens", path);
      v->file = std::make_unique<kvserve::GgufFile>(std::move(file).value());
      auto tokenizer = kvserve::Tokenizer::FromGguf(*v->file);
      Check(tokenizer.ok(), "KVSERVE_FUZZ_MODEL has a tokenizer", path);
      v->tokenizer = std::move(tokenizer).value();
      v->n_vocab = v->tokenizer->n_vocab();
      for (std::string_view name : kvserve::ChatTemplate::kNames) {
        auto chat = kvserve::ChatTemplate::ByName(name);
        if (chat.ok()) v->templates.push_back(std::move(chat).value());
      }
    }
    return v;
  }();
  return *vocab;
}

void CheckAccepted(const CompletionRequest& r, CompletionKind kind, const Vocabulary& vocab) {
  Check(r.n >= 1 && r.n <= kvserve::kMaxChoices, "n in range", std::to_string(r.n));
  Check(!r.max_tokens || *r.max_tokens >= 1, "max_tokens positive");
  Check(r.stop.size() <= static_cast<size_t>(kvserve::kMaxStopStrings), "stop count");
  for (const std::string& s : r.stop) Check(!s.empty() && s.size() <= 1024, "stop length");
  Check(r.sampling.top_logprobs >= 0 && r.sampling.top_logprobs <= kvserve::kMaxTopLogprobs,
        "top_logprobs in range");
  Check(r.sampling.temperature >= 0 && r.sampling.temperature <= 2, "temperature in range");
  Check(r.sampling.top_p > 0 && r.sampling.top_p <= 1, "top_p in range");
  Check(r.sampling.top_k >= 0 && r.sampling.top_k <= vocab.n_vocab, "top_k in range");
  Check(std::isfinite(r.sampling.presence_penalty) && std::isfinite(r.sampling.frequency_penalty),
        "penalties finite");
  const kvserve::Status engine_check = r.sampling.Validate(vocab.n_vocab);
  Check(engine_check.ok(), "the engine accepts the sampling parameters", engine_check.message());
  for (const auto& [id, bias] : r.sampling.logit_bias) {
    Check(id >= 0 && id < vocab.n_vocab && bias >= -100 && bias <= 100, "logit_bias in range");
  }
  for (const std::string* id : {&r.user, &r.session_id, &r.cache_salt, &r.model}) {
    Check(id->size() <= kvserve::kMaxIdBytes, "id length");
  }
  auto check_ids = [&](const std::vector<int32_t>& ids) {
    for (int32_t id : ids) Check(id >= 0 && id < vocab.n_vocab, "token id in vocabulary");
  };
  if (kind == CompletionKind::kText) {
    Check(!r.prompts.empty() && r.prompts.size() <= static_cast<size_t>(kvserve::kMaxPrompts),
          "prompt count");
    for (const kvserve::PromptInput& p : r.prompts) {
      if (p.is_tokens) {
        Check(!p.tokens.empty(), "token prompt not empty");
        check_ids(p.tokens);
      } else if (vocab.tokenizer) {
        check_ids(vocab.tokenizer->Encode(p.text, /*add_special=*/true, /*parse_special=*/true));
      }
    }
  } else {
    Check(!r.messages.empty(), "messages not empty");
    if (vocab.tokenizer) {
      for (const kvserve::ChatTemplate& chat : vocab.templates) {
        check_ids(chat.EncodePrompt(*vocab.tokenizer, chat.Render(r.messages, true)));
        if (!r.tools.empty() && chat.CheckToolUse(r.messages, r.tools).ok()) {
          check_ids(chat.EncodeConversation(*vocab.tokenizer, r.messages, true, r.tools));
        }
      }
    }
  }
}

// A complete head's framing: refused with 400/411/501 and a message, or accepted with one
// meaning; a chunked body after it is checked in pieces of every size up to 7 with the same
// verdict and the same valid prefix as in one piece.
void CheckFraming(std::string_view head, std::string_view body) {
  const kvserve::RequestFraming framing = kvserve::CheckRequestHead(head);
  if (framing.error) {
    const int status = framing.error->http_status;
    Check(status == 400 || status == 411 || status == 501, "a refused framing is 400/411/501");
    Check(!framing.error->message.empty() && framing.error->message.size() < 1024,
          "a framing error has a short message");
    return;
  }
  Check(head.find("\r\n\r\n") == head.size() - 4, "an accepted head ends at its first blank line");
  Check(!(framing.chunked && framing.content_length > 0), "chunked or a length, not both");
  if (!framing.chunked) return;
  kvserve::ChunkedBodyCheck whole;
  const size_t valid = whole.Feed(body);
  Check(valid <= body.size() && (valid == body.size() || whole.done() || whole.error()),
        "a chunked body stops early only at its end or a fault");
  for (size_t piece = 1; piece <= 7; ++piece) {
    kvserve::ChunkedBodyCheck pieces;
    size_t fed = 0;
    for (size_t at = 0; at < body.size(); at += piece) {
      fed += pieces.Feed(body.substr(at, piece));
      if (pieces.done() || pieces.error()) break;
    }
    Check(fed == valid && pieces.done() == whole.done() &&
              pieces.error().has_value() == whole.error().has_value(),
          "a chunked body's verdict does not depend on how it arrives");
  }
}

// A translation onto the chat route (/v1/messages, /v1/responses): refused with a 4xx whose
// message names its field, or a chat body the chat route refuses or accepts within every limit.
template <typename Translate>
void CheckTranslated(const nlohmann::json& body, Translate translate, const Vocabulary& vocab) {
  nlohmann::json chat;
  if (auto error = translate(body, chat)) {
    CheckError(*error);
    Check(!error->param.empty() && error->message.find(error->param) != std::string::npos,
          "a translation error names its field", error->message);
    return;
  }
  Check(chat.is_object() && chat["messages"].is_array() && !chat["messages"].empty(),
        "a translated body has messages", chat.dump().substr(0, 200));
  CompletionRequest request;
  if (auto error =
          kvserve::ParseCompletionRequest(chat, CompletionKind::kChat, vocab.n_vocab, request)) {
    CheckError(*error);
  } else {
    CheckAccepted(request, CompletionKind::kChat, vocab);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Vocabulary& vocab = Vocab();
  const std::string text(reinterpret_cast<const char*>(data), size);

  const kvserve::HeadScan head = kvserve::ScanRequestHead(text);
  Check(head.end <= size, "head ends inside the input");
  Check(head.lines <= kvserve::kMaxHeaderCount + 1, "header lines counted within the limit");
  if (head.error) {
    Check((head.error->http_status == 431 || head.error->http_status == 414) && head.end == 0,
          "a refused head is 431 or 414");
  } else {
    Check(head.end <= kvserve::kMaxHeaderBytes, "an accepted head is within the byte limit");
  }
  if (head.end > 0) CheckFraming(std::string_view(text).substr(0, head.end), text.substr(head.end));

  nlohmann::json body;
  if (auto error = kvserve::ParseJsonBody(text, body)) {
    CheckError(*error);
    return 0;
  }
  Check(body.is_object(), "an accepted body is an object");
  for (CompletionKind kind : {CompletionKind::kText, CompletionKind::kChat}) {
    CompletionRequest request;
    if (auto error = kvserve::ParseCompletionRequest(body, kind, vocab.n_vocab, request)) {
      CheckError(*error);
    } else {
      CheckAccepted(request, kind, vocab);
    }
  }
  CheckTranslated(body, kvserve::AnthropicToChat, vocab);
  CheckTranslated(body, kvserve::ResponsesToChat, vocab);
  Check(kvserve::ResponseShell(body).is_object(), "the response shell is an object");
  return 0;
}
