// SHA-256 (FIPS 180-4), used for prefix-cache block keys so that collisions cannot be engineered.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kvserve {

using Sha256Digest = std::array<uint8_t, 32>;

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  Sha256Digest Finish();  // the object must not be updated afterwards

  static Sha256Digest Hash(const void* data, size_t n);
  static std::string Hex(const Sha256Digest& digest);

 private:
  void Compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

}  // namespace kvserve
