#include "server/embeddings_route.h"

#include <cstring>
#include <utility>

#include "server/openai_routes.h"
#include "util/base64.h"

namespace kvserve {

using nlohmann::json;

json EmbeddingsJson(const Embeddings& embeddings, const std::string& model_id, bool base64) {
  json data = json::array();
  for (size_t i = 0; i < embeddings.vectors.size(); ++i) {
    const std::vector<float>& v = embeddings.vectors[i];
    json vector;
    if (base64) {
      std::vector<uint8_t> bytes(v.size() * sizeof(float));
      std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian hosts only (x86, arm)
      vector = Base64Encode(bytes);
    } else {
      vector = v;
    }
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", std::move(vector)}});
  }
  return {
      {"object", "list"},
      {"data", std::move(data)},
      {"model", model_id},
      {"usage",
       {{"prompt_tokens", embeddings.total_tokens}, {"total_tokens", embeddings.total_tokens}}}};
}

namespace {

bool IsTokenList(const json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const json& t : v) {
    if (!t.is_number_integer()) return false;
  }
  return true;
}

std::optional<ApiError> TokenList(const json& v, const std::string& where,
                                  std::vector<int32_t>& out) {
  for (const json& t : v) {
    const int64_t id = t.get<int64_t>();
    if (id < INT32_MIN || id > INT32_MAX) {
      return ApiError::BadRequest(where + ": token id " + std::to_string(id) + " is out of range",
                                  "input");
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> ParseEmbeddingInputs(const json& input, const Tokenizer& tokenizer,
                                             std::vector<std::vector<int32_t>>& out) {
  auto encode = [&](const json& text) {
    out.push_back(tokenizer.Encode(text.get<std::string>(), /*add_special=*/true,
                                   /*parse_special=*/true));
  };
  if (input.is_string()) {
    encode(input);
    return std::nullopt;
  }
  if (IsTokenList(input)) return TokenList(input, "input", out.emplace_back());
  if (!input.is_array() || input.empty()) {
    return ApiError::BadRequest(
        "'input' must be a string, an array of strings, an array of token ids or an array of "
        "such arrays (non-empty)",
        "input");
  }
  for (size_t i = 0; i < input.size(); ++i) {
    const std::string where = "input[" + std::to_string(i) + "]";
    if (input[i].is_string()) {
      encode(input[i]);
    } else if (IsTokenList(input[i])) {
      if (auto error = TokenList(input[i], where, out.emplace_back())) return error;
    } else {
      return ApiError::BadRequest(where + " must be a string or a non-empty array of token ids",
                                  "input");
    }
  }
  return std::nullopt;
}

void ServeEmbeddings(const std::string& text, Embedder& embedder, const Tokenizer& tokenizer,
                     Pooling pooling, const std::string& model_id, httplib::Response& response) {
  const int n_embd = embedder.dim();
  if (Status supported = embedder.Supported(); !supported.ok()) {
    return ReplyError(response, ApiError::BadRequest(supported.message(), "model"));
  }
  if (pooling == Pooling::kNone) {
    return ReplyError(response,
                      ApiError::BadRequest("this server pools with 'none' (a vector per token); "
                                           "/v1/embeddings gives one per input: start it with "
                                           "--pooling mean, cls or last",
                                           "input"));
  }
  json body;
  if (auto error = ParseJsonBody(text, body)) return ReplyError(response, *error);
  auto input = body.find("input");
  if (input == body.end()) {
    return ReplyError(response, ApiError::BadRequest("'input' is required", "input"));
  }
  bool base64 = false;
  if (auto format = body.find("encoding_format"); format != body.end() && !format->is_null()) {
    if (!format->is_string() || (*format != "float" && *format != "base64")) {
      return ReplyError(
          response, ApiError::BadRequest(
                        "'encoding_format' must be \"float\" or \"base64\", not " + format->dump(),
                        "encoding_format"));
    }
    base64 = *format == "base64";
  }
  if (auto dims = body.find("dimensions"); dims != body.end() && !dims->is_null()) {
    if (!dims->is_number_integer() || dims->get<int64_t>() != n_embd) {
      return ReplyError(response, ApiError::BadRequest("'dimensions' = " + dims->dump() +
                                                           ": this model gives vectors of " +
                                                           std::to_string(n_embd) + " only",
                                                       "dimensions"));
    }
  }
  EmbedOptions options{.pooling = pooling};
  if (auto norm = body.find("embd_normalize"); norm != body.end() && !norm->is_null()) {
    if (!norm->is_number_integer() || norm->get<int64_t>() < -1 || norm->get<int64_t>() > 1000) {
      return ReplyError(response,
                        ApiError::BadRequest("'embd_normalize' = " + norm->dump() +
                                                 " (-1 none, 0 max-abs, 1 taxicab, 2 euclidean, "
                                                 "p > 2 p-norm, up to 1000)",
                                             "embd_normalize"));
    }
    options.normalize = norm->get<int>();
  }
  std::vector<std::vector<int32_t>> inputs;
  if (auto error = ParseEmbeddingInputs(*input, tokenizer, inputs)) {
    return ReplyError(response, *error);
  }
  auto embeddings = embedder.Run(inputs, options);
  if (!embeddings.ok()) {
    return ReplyError(response, ApiError::BadRequest(embeddings.message(), "input"));
  }
  ReplyJson(response, 200, EmbeddingsJson(*embeddings, model_id, base64));
}

}  // namespace kvserve
