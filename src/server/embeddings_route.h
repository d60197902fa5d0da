// POST /v1/embeddings, OpenAI's embeddings API as llama-server serves it:
//   {"input": a string | [strings] | [token ids] | [[token ids]], "encoding_format": "float"
//    (default) | "base64" (each vector's little-endian float32 bytes; what the openai Python
//    client asks for), "model": not checked (the one served), "embd_normalize": llama.cpp's
//    normalization (embedder.h; default 2, euclidean)}
//   -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": ...}],
//       "model": id, "usage": {"prompt_tokens": n, "total_tokens": n}}
// Texts are tokenized with the model's special tokens added (T5: </s>) and special-token text
// read, as llama.cpp's tools do. One vector per input: the server's pooling (--pooling) must not
// be none. "dimensions" is refused unless it is the model's width (no truncation is trained).
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/embedder.h"
#include "server/api_error.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {

// The response's JSON for `embeddings` (pooled, one per input) under model id `model_id`.
nlohmann::json EmbeddingsJson(const Embeddings& embeddings, const std::string& model_id,
                              bool base64);

// The body's inputs as token lists (a 400 naming the field on anything else).
std::optional<ApiError> ParseEmbeddingInputs(const nlohmann::json& input,
                                             const Tokenizer& tokenizer,
                                             std::vector<std::vector<int32_t>>& out);

// Answers one request; `pooling` is the server's (--pooling). Thread-safe (the embedder runs one
// batch at a time).
void ServeEmbeddings(const std::string& body, Embedder& embedder, const Tokenizer& tokenizer,
                     Pooling pooling, const std::string& model_id, httplib::Response& response);

}  // namespace kvserve
