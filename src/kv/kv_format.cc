#include "kv/kv_format.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/half.h"

namespace kvserve {

namespace {

int GroupCount(int head_dim) { return (head_dim + kKvQuantGroup - 1) / kKvQuantGroup; }

void StoreScale(uint8_t* scales, int group, float d) {
  const uint16_t h = FloatToFp16(d);
  std::memcpy(scales + 2 * static_cast<size_t>(group), &h, 2);
}

float LoadScale(const uint8_t* scales, int group) {
  uint16_t h;
  std::memcpy(&h, scales + 2 * static_cast<size_t>(group), 2);
  return Fp16ToFloat(h);
}

// round(v) clamped to [lo, hi]; NaN gives 0.
int RoundClamped(float v, int lo, int hi) {
  if (std::isnan(v)) return 0;
  return static_cast<int>(
      std::clamp(std::round(v), static_cast<float>(lo), static_cast<float>(hi)));
}

void EncodeQ8_0(const float* x, int n, uint8_t* dst) {
  int8_t* codes = reinterpret_cast<int8_t*>(dst);
  uint8_t* scales = dst + n;
  for (int g = 0; g * kKvQuantGroup < n; ++g) {
    const int begin = g * kKvQuantGroup;
    const int end = std::min(n, begin + kKvQuantGroup);
    float amax = 0.0f;
    for (int i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f && std::isfinite(d) ? 1.0f / d : 0.0f;
    for (int i = begin; i < end; ++i)
      codes[i] = static_cast<int8_t>(RoundClamped(x[i] * id, -127, 127));
    StoreScale(scales, g, d);
  }
}

void EncodeQ4_0(const float* x, int n, uint8_t* dst) {
  const size_t code_bytes = KvCodeBytes(KvType::kQ4_0, n);
  std::memset(dst, 0, code_bytes);
  uint8_t* scales = dst + code_bytes;
  for (int g = 0; g * kKvQuantGroup < n; ++g) {
    const int begin = g * kKvQuantGroup;
    const int end = std::min(n, begin + kKvQuantGroup);
    float amax = 0.0f;
    float max = 0.0f;  // the value of largest magnitude, with its sign (the first on ties)
    for (int i = begin; i < end; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f && std::isfinite(d) ? 1.0f / d : 0.0f;
    for (int i = begin; i < end; ++i) {
      // x * id lies in [-8, 8]: code = round(x * id) + 8, clamped to 15 (the +8 end).
      const uint8_t code = static_cast<uint8_t>(RoundClamped(x[i] * id, -8, 7) + 8);
      dst[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code : code << 4);
    }
    StoreScale(scales, g, d);
  }
}

}  // namespace

const char* KvTypeName(KvType type) {
  switch (type) {
    case KvType::kF32:
      return "f32";
    case KvType::kF16:
      return "f16";
    case KvType::kBF16:
      return "bf16";
    case KvType::kQ8_0:
      return "q8_0";
    case KvType::kQ4_0:
      return "q4_0";
  }
  return "?";
}

bool KvTypeIsQuantized(KvType type) { return type == KvType::kQ8_0 || type == KvType::kQ4_0; }

size_t KvCodeBytes(KvType type, int head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  return type == KvType::kQ4_0 ? (n + 1) / 2 : n;
}

size_t KvHeadBytes(KvType type, int head_dim) {
  const size_t n = static_cast<size_t>(head_dim);
  switch (type) {
    case KvType::kF32:
      return 4 * n;
    case KvType::kF16:
    case KvType::kBF16:
      return 2 * n;
    case KvType::kQ8_0:
    case KvType::kQ4_0:
      return KvCodeBytes(type, head_dim) + 2 * static_cast<size_t>(GroupCount(head_dim));
  }
  return 0;
}

Result<KvType> ParseKvType(const std::string& name) {
  for (KvType type : kAllKvTypes) {
    if (name == KvTypeName(type)) return type;
  }
  return Status::InvalidArgument("KV type '" + name + "' is not one of f32, f16, bf16, q8_0, q4_0");
}

void EncodeKvHead(KvType type, const float* x, int head_dim, uint8_t* dst) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(dst, x, 4 * static_cast<size_t>(head_dim));
      return;
    case KvType::kF16:
      for (int i = 0; i < head_dim; ++i) {
        const uint16_t h = FloatToFp16(x[i]);
        std::memcpy(dst + 2 * static_cast<size_t>(i), &h, 2);
      }
      return;
    case KvType::kBF16:
      for (int i = 0; i < head_dim; ++i) {
        const uint16_t h = FloatToBf16(x[i]);
        std::memcpy(dst + 2 * static_cast<size_t>(i), &h, 2);
      }
      return;
    case KvType::kQ8_0:
      return EncodeQ8_0(x, head_dim, dst);
    case KvType::kQ4_0:
      return EncodeQ4_0(x, head_dim, dst);
  }
}

void DecodeKvHead(KvType type, const uint8_t* src, int head_dim, float* out) {
  switch (type) {
    case KvType::kF32:
      std::memcpy(out, src, 4 * static_cast<size_t>(head_dim));
      return;
    case KvType::kF16:
    case KvType::kBF16:
      for (int i = 0; i < head_dim; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * static_cast<size_t>(i), 2);
        out[i] = type == KvType::kF16 ? Fp16ToFloat(h) : Bf16ToFloat(h);
      }
      return;
    case KvType::kQ8_0:
    case KvType::kQ4_0: {
      const uint8_t* scales = src + KvCodeBytes(type, head_dim);
      for (int i = 0; i < head_dim; ++i) {
        const float d = LoadScale(scales, i / kKvQuantGroup);
        const int code = type == KvType::kQ8_0 ? static_cast<int8_t>(src[i])
                                               : ((src[i / 2] >> (4 * (i % 2))) & 15) - 8;
        out[i] = d * static_cast<float>(code);
      }
      return;
    }
  }
}

KvFormat KvFormat::PerGroup(std::vector<KvType> types) {
  KvFormat format(types.empty() ? KvType::kF32 : types[0]);
  format.per_group_ = std::move(types);
  return format;
}

Result<KvFormat> KvFormat::Parse(const std::string& text) {
  std::vector<KvType> types;
  size_t begin = 0;
  for (;;) {
    const size_t comma = text.find(',', begin);
    const std::string part =
        text.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin);
    auto type = ParseKvType(part);
    if (!type.ok()) return type.status();
    types.push_back(*type);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (types.size() == 1) return KvFormat(types[0]);
  return PerGroup(std::move(types));
}

std::string KvFormat::Name() const {
  if (per_group_.empty()) return KvTypeName(all_);
  std::string name;
  for (KvType type : per_group_) name += (name.empty() ? "" : ",") + std::string(KvTypeName(type));
  return name;
}

}  // namespace kvserve
