#include "util/base64.h"

#include <algorithm>
#include <string>

namespace kvserve {

namespace {

// The 6-bit value of an alphabet character, -1 for any other.
int SextetOf(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

}  // namespace

Result<std::vector<uint8_t>> Base64Decode(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && text.size() - end < 2 && text[end - 1] == '=') --end;
  if (end != text.size() && text.size() % 4 != 0) {
    return Status::InvalidArgument("base64: " + std::to_string(text.size()) +
                                   " characters with padding, not a multiple of 4");
  }
  if (end % 4 == 1) {
    return Status::InvalidArgument("base64: " + std::to_string(end) +
                                   " characters leave 6 bits over, not a whole byte");
  }
  std::vector<uint8_t> out;
  out.reserve(end / 4 * 3 + 2);
  uint32_t bits = 0;
  int n_bits = 0;
  for (size_t i = 0; i < end; ++i) {
    const int sextet = SextetOf(text[i]);
    if (sextet < 0) {
      return Status::InvalidArgument("base64: character " + std::to_string(i) + " (byte " +
                                     std::to_string(static_cast<unsigned char>(text[i])) +
                                     ") is not in the alphabet");
    }
    bits = (bits << 6) | static_cast<uint32_t>(sextet);
    n_bits += 6;
    if (n_bits >= 8) {
      n_bits -= 8;
      out.push_back(static_cast<uint8_t>(bits >> n_bits));
      bits &= (1u << n_bits) - 1;
    }
  }
  return out;
}

std::string Base64Encode(std::span<const uint8_t> bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t group = static_cast<uint32_t>(bytes[i]) << 16;
    if (n > 1) group |= static_cast<uint32_t>(bytes[i + 1]) << 8;
    if (n > 2) group |= bytes[i + 2];
    for (size_t k = 0; k < 4; ++k) {
      out.push_back(k <= n ? kAlphabet[(group >> (18 - 6 * k)) & 63] : '=');
    }
  }
  return out;
}

}  // namespace kvserve
