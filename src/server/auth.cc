#include "server/auth.h"

#include <fstream>

namespace kvserve {

bool ConstantTimeEquals(std::string_view presented, std::string_view secret) {
  unsigned char diff = presented.size() == secret.size() ? 0 : 1;
  if (secret.empty()) return presented.empty();
  // Every presented byte is compared with some secret byte; no early exit.
  for (size_t i = 0; i < presented.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ secret[i % secret.size()]);
  }
  return diff == 0;
}

std::string ApiKeys::TenantTag(std::string_view key) {
  return Sha256::Hex(Sha256::Hash(key.data(), key.size())).substr(0, 16);
}

Result<ApiKeys> ApiKeys::FromList(std::vector<std::string> keys) {
  ApiKeys out;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    if (key.empty())
      return Result<ApiKeys>::InvalidArgument("API key " + std::to_string(i) + " is empty");
    for (char c : key) {
      if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) {
        return Result<ApiKeys>::InvalidArgument("API key " + std::to_string(i) +
                                                " holds whitespace or a control character");
      }
    }
    const Sha256Digest digest = Sha256::Hash(key.data(), key.size());
    out.tags_.push_back(Sha256::Hex(digest).substr(0, 16));
    out.digests_.push_back(digest);
  }
  return out;
}

Result<ApiKeys> ApiKeys::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Result<ApiKeys>::InvalidArgument("--api-key-file '" + path + "': cannot open");
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.pop_back();
    }
    size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#') continue;
    keys.push_back(line.substr(start));
    if (keys.size() > 10000) {
      return Result<ApiKeys>::InvalidArgument("--api-key-file '" + path +
                                              "': more than 10000 keys");
    }
  }
  if (keys.empty())
    return Result<ApiKeys>::InvalidArgument("--api-key-file '" + path + "': no keys in it");
  auto result = FromList(std::move(keys));
  if (!result.ok())
    return Result<ApiKeys>::InvalidArgument("--api-key-file '" + path + "': " + result.message());
  return result;
}

std::optional<std::string> ApiKeys::Check(std::string_view authorization) const {
  if (digests_.empty()) return std::string("anon");
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.size() <= kBearer.size() ||
      authorization.substr(0, kBearer.size()) != kBearer) {
    return std::nullopt;
  }
  const std::string_view presented = authorization.substr(kBearer.size());
  const Sha256Digest digest = Sha256::Hash(presented.data(), presented.size());
  const std::string_view mine(reinterpret_cast<const char*>(digest.data()), digest.size());
  // Compare against every key (no early exit) so the time does not tell which one matched.
  int match = -1;
  for (size_t i = 0; i < digests_.size(); ++i) {
    const std::string_view theirs(reinterpret_cast<const char*>(digests_[i].data()),
                                  digests_[i].size());
    if (ConstantTimeEquals(mine, theirs)) match = static_cast<int>(i);
  }
  if (match < 0) return std::nullopt;
  return tags_[match];
}

}  // namespace kvserve
