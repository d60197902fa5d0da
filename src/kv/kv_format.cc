#include "kv/kv_format.h"

namespace kvserve {

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF32:
      return "f32";
    case KvType::kF16:
      return "f16";
    case KvType::kBF16:
      return "bf16";
  }
  return "?";
}

size_t KvTypeBytes(KvType type) { return type == KvType::kF32 ? 4 : 2; }

Result<KvType> ParseKvType(const std::string& name) {
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kBF16}) {
    if (name == KvTypeName(type)) return type;
  }
  return Status::InvalidArgument("KV type '" + name + "' is not one of f32, f16, bf16");
}

}  // namespace kvserve
