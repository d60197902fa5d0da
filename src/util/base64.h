// Base64 (RFC 4648: A-Z a-z 0-9 + /, '=' padding), as Python's base64.b64encode writes it; used for
// the SentencePiece character map a Hugging Face tokenizer.json stores as text, and embeddings
// sent as base64 (OpenAI's encoding_format).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

// The bytes of `text`. Padding is optional; whitespace, the URL-safe alphabet, a '=' before the
// end or a length of 4k + 1 are errors that give the offset and the character.
Result<std::vector<uint8_t>> Base64Decode(std::string_view text);
// `bytes` in the standard alphabet with '=' padding.
std::string Base64Encode(std::span<const uint8_t> bytes);

}  // namespace kvserve
