#include "tokenizer/utf8.h"

namespace kvserve {

void AppendUtf8(char32_t cp, std::string& out) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) cp = kReplacementChar;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t DecodeUtf8(std::string_view text, char32_t* cp) {
  if (text.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    if (cp != nullptr) *cp = lead;
    return 1;
  }
  size_t length = 0;
  char32_t value = 0;
  uint8_t lower = 0x80;
  uint8_t upper = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
    if (lead == 0xE0) lower = 0xA0;  // no overlong forms
    if (lead == 0xED) upper = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
    if (lead == 0xF0) lower = 0x90;
    if (lead == 0xF4) upper = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < length) return 0;
  for (size_t i = 1; i < length; ++i) {
    const uint8_t b = byte(i);
    if (b < lower || b > upper) return 0;
    lower = 0x80;
    upper = 0xBF;
    value = (value << 6) | (b & 0x3F);
  }
  if (cp != nullptr) *cp = value;
  return length;
}

bool IsValidUtf8(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    const size_t length = DecodeUtf8(text.substr(offset));
    if (length == 0) return false;
    offset += length;
  }
  return true;
}

void Utf8Sanitizer::Reset() {
  code_point_ = 0;
  bytes_needed_ = 0;
  bytes_seen_ = 0;
  lower_ = 0x80;
  upper_ = 0xBF;
}

std::string Utf8Sanitizer::Feed(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    if (bytes_needed_ == 0) {
      ++i;
      if (b < 0x80) {
        out.push_back(static_cast<char>(b));
      } else if (b >= 0xC2 && b <= 0xDF) {
        bytes_needed_ = 1;
        code_point_ = b & 0x1F;
      } else if (b >= 0xE0 && b <= 0xEF) {
        if (b == 0xE0) lower_ = 0xA0;
        if (b == 0xED) upper_ = 0x9F;
        bytes_needed_ = 2;
        code_point_ = b & 0x0F;
      } else if (b >= 0xF0 && b <= 0xF4) {
        if (b == 0xF0) lower_ = 0x90;
        if (b == 0xF4) upper_ = 0x8F;
        bytes_needed_ = 3;
        code_point_ = b & 0x07;
      } else {
        out.append(kReplacementUtf8);
      }
      continue;
    }
    if (b < lower_ || b > upper_) {
      // The unfinished character is invalid; the byte itself is looked at again as a lead byte.
      Reset();
      out.append(kReplacementUtf8);
      continue;
    }
    ++i;
    lower_ = 0x80;
    upper_ = 0xBF;
    code_point_ = (code_point_ << 6) | (b & 0x3F);
    if (++bytes_seen_ == bytes_needed_) {
      AppendUtf8(code_point_, out);
      Reset();
    }
  }
  return out;
}

std::string Utf8Sanitizer::Finish() {
  if (bytes_needed_ == 0) return "";
  Reset();
  return std::string(kReplacementUtf8);
}

std::string SanitizeUtf8(std::string_view bytes) {
  Utf8Sanitizer sanitizer;
  std::string out = sanitizer.Feed(bytes);
  out += sanitizer.Finish();
  return out;
}

std::string ReencodeUtf8AsLlamaCpp(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t offset = 0;
  while (offset < bytes.size()) {
    char32_t cp = 0;
    const size_t length = DecodeUtf8AsLlamaCpp(bytes, offset, &cp);
    if (length == 0) {
      out.append(kReplacementUtf8);
      ++offset;
      continue;
    }
    offset += length;
    if (cp >= 0xD800 && cp <= 0xDFFF) {  // AppendUtf8 would replace it; llama.cpp keeps it
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      AppendUtf8(cp, out);
    }
  }
  return out;
}

size_t DecodeUtf8AsLlamaCpp(std::string_view text, size_t offset, char32_t* cp) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[offset + i]); };
  if (offset >= text.size()) return 0;
  const uint8_t lead = byte(0);
  if (lead < 0x80) {
    if (cp != nullptr) *cp = lead;
    return 1;
  }
  size_t length = 0;
  if ((lead & 0x40) == 0) return 0;
  if ((lead & 0x20) == 0) {
    length = 2;
  } else if ((lead & 0x10) == 0) {
    length = 3;
  } else if ((lead & 0x08) == 0) {
    length = 4;
  } else {
    return 0;
  }
  if (offset + length > text.size()) return 0;
  char32_t value = lead & (0x7F >> length);
  for (size_t i = 1; i < length; ++i) {
    if ((byte(i) & 0xC0) != 0x80) return 0;
    value = (value << 6) | (byte(i) & 0x3F);
  }
  if (cp != nullptr) *cp = value;
  return length;
}

}  // namespace kvserve
