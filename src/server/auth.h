// API keys: `Authorization: Bearer KEY`, and the tenant tag derived from the key that prefix-cache
// salts and session ids are scoped by, so cached blocks and sessions never cross keys. Only the
// SHA-256 of each key is kept in memory; a presented key is hashed and its digest compared with
// every stored one in constant time, so neither where it differs nor which key matched shows in
// the time. Keys are never logged.
//
//   auto keys = ApiKeys::FromFile("keys.txt");   // one key per line; '#' lines ignored
//   std::optional<std::string> tenant = keys->Check(request.get_header_value("Authorization"));
//
// Immutable after construction; safe to call from many threads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "util/sha256.h"
#include "util/status.h"

namespace kvserve {

class ApiKeys {
 public:
  ApiKeys() = default;  // no keys: every request is allowed, all in one tenant
  static Result<ApiKeys> FromList(std::vector<std::string> keys);
  static Result<ApiKeys> FromFile(const std::string& path);

  bool enabled() const { return !digests_.empty(); }
  // The tenant tag (hex of SHA-256 of the key, 16 chars) when `authorization` is "Bearer KEY" for
  // a known key; "anon" when no keys are set; nullopt otherwise. Time does not depend on where a
  // presented key differs from a real one.
  std::optional<std::string> Check(std::string_view authorization) const;

  static std::string TenantTag(std::string_view key);

 private:
  std::vector<Sha256Digest> digests_;  // SHA-256 of each key; the keys themselves are not kept
  std::vector<std::string> tags_;
};

// True when a == b, in time that depends only on a.size() (the presented side).
bool ConstantTimeEquals(std::string_view presented, std::string_view secret);

}  // namespace kvserve
