#include "io/ggml_type.h"

#include <algorithm>
#include <cctype>

namespace kvserve {

namespace {
struct Entry {
  uint32_t id;
  GgmlTypeTraits traits;
};
constexpr Entry kTypes[] = {
    {0, {"F32", 1, 4, true}},       {1, {"F16", 1, 2, true}},        {2, {"Q4_0", 32, 18, true}},
    {3, {"Q4_1", 32, 20, true}},    {6, {"Q5_0", 32, 22, true}},     {7, {"Q5_1", 32, 24, true}},
    {8, {"Q8_0", 32, 34, true}},    {9, {"Q8_1", 32, 36, false}},    {10, {"Q2_K", 256, 84, true}},
    {11, {"Q3_K", 256, 110, true}}, {12, {"Q4_K", 256, 144, true}},  {13, {"Q5_K", 256, 176, true}},
    {14, {"Q6_K", 256, 210, true}}, {15, {"Q8_K", 256, 292, false}}, {20, {"IQ4_NL", 32, 18, true}},
    {24, {"I8", 1, 1, false}},      {25, {"I16", 1, 2, false}},      {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},     {28, {"F64", 1, 8, false}},      {30, {"BF16", 1, 2, true}},
    {39, {"MXFP4", 32, 17, true}},
};
}  // namespace

std::optional<GgmlTypeTraits> GetGgmlTypeTraits(uint32_t type_id) {
  for (const Entry& entry : kTypes) {
    if (entry.id == type_id) return entry.traits;
  }
  return std::nullopt;
}

GgmlTypeTraits TraitsOf(GgmlType type) { return *GetGgmlTypeTraits(static_cast<uint32_t>(type)); }

const char* GgmlTypeName(GgmlType type) { return TraitsOf(type).name; }

std::optional<GgmlType> ParseGgmlType(const std::string& name) {
  std::string upper = name;
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const Entry& entry : kTypes) {
    if (upper == entry.traits.name) return static_cast<GgmlType>(entry.id);
  }
  return std::nullopt;
}

}  // namespace kvserve
