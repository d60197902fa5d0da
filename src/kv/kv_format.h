// Element formats of the KV cache. A layer group's K and V rows are stored in one of these; the
// attention kernels read them directly and a token's K/V is rounded to it exactly once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.h"

namespace kvserve {

enum class KvType : uint8_t { kF32, kF16, kBF16 };

const char* KvTypeName(KvType type);
size_t KvTypeBytes(KvType type);
// "f32", "f16" or "bf16"; an error names the value and the choices.
Result<KvType> ParseKvType(const std::string& name);

}  // namespace kvserve
