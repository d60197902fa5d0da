// Overflow-checked arithmetic on sizes read from untrusted files. Every count, length, offset and
// size from a file passes through these before it is used or allocated.
#pragma once

#include <cstdint>
#include <optional>

namespace kvserve {

inline std::optional<uint64_t> CheckedAdd(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<uint64_t> CheckedMul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Rounds `value` up to a multiple of `alignment` (> 0); nullopt on overflow.
inline std::optional<uint64_t> CheckedAlignUp(uint64_t value, uint64_t alignment) {
  auto padded = CheckedAdd(value, alignment - 1);
  if (!padded) return std::nullopt;
  return *padded / alignment * alignment;
}

}  // namespace kvserve
