// UTF-8 helpers shared by the tokenizers and the streaming decoder: validated decoding of one
// character, encoding of a code point, and a byte-at-a-time sanitizer that turns invalid input into
// U+FFFD. The sanitizer follows the WHATWG "UTF-8 decode" algorithm (one U+FFFD per maximal invalid
// subpart), so feeding the bytes in any number of pieces yields the same text as feeding them at
// once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvserve {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Appends the UTF-8 encoding of `cp` (at most 4 bytes) to `out`. Surrogates and values above
// U+10FFFF are encoded as U+FFFD.
void AppendUtf8(char32_t cp, std::string& out);

// Length in bytes of the well-formed UTF-8 character at the start of `text`, or 0 if `text` is
// empty or does not start with a well-formed character (bad lead byte, truncated, overlong,
// surrogate, beyond U+10FFFF). On success, stores the code point in `*cp` when not null.
size_t DecodeUtf8(std::string_view text, char32_t* cp = nullptr);

// llama.cpp's unicode_cpt_from_utf8: the length in bytes of the character at `offset` (and its
// code point in `*cp` when not null), or 0 when the lead byte is a continuation byte or 0xF8..,
// the continuation bytes are missing, or offset is past the end. Overlong forms, surrogates and
// leads F5..F7 are accepted.
size_t DecodeUtf8AsLlamaCpp(std::string_view text, size_t offset, char32_t* cp = nullptr);

// True when every byte of `text` belongs to a well-formed UTF-8 character.
bool IsValidUtf8(std::string_view text);

// Incremental sanitizer. Feed() returns the text that is complete so far (invalid bytes replaced
// by U+FFFD) and keeps the bytes of an unfinished character; Finish() ends the stream, replacing an
// unfinished character with one U+FFFD. Not thread-safe; one instance per stream.
class Utf8Sanitizer {
 public:
  std::string Feed(std::string_view bytes);
  std::string Finish();
  // Bytes of an unfinished character currently held back (0..3).
  int pending_bytes() const { return bytes_seen_ + (bytes_needed_ > 0 ? 1 : 0); }

 private:
  void Reset();

  char32_t code_point_ = 0;
  int bytes_needed_ = 0;  // continuation bytes still expected after the lead byte
  int bytes_seen_ = 0;    // continuation bytes accepted so far
  uint8_t lower_ = 0x80;  // allowed range of the next continuation byte
  uint8_t upper_ = 0xBF;
};

// Whole-string form of Utf8Sanitizer: valid UTF-8 is returned unchanged.
std::string SanitizeUtf8(std::string_view bytes);

// `bytes` as llama.cpp's tokenizer reads and rewrites them before a split (unicode.cpp's
// unicode_cpts_from_utf8, then each code point encoded again): a lead byte followed by enough
// continuation bytes is one code point, without the checks of DecodeUtf8 (overlong forms come
// out in their shortest form, surrogates stay); any other byte becomes U+FFFD. Code points above
// U+10FFFF (leads F4 90.. to F7), which llama.cpp cannot encode again (it throws), become U+FFFD.
// Valid UTF-8 is returned unchanged.
std::string ReencodeUtf8AsLlamaCpp(std::string_view bytes);

}  // namespace kvserve
