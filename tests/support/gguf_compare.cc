#include "support/gguf_compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace kvserve::testing {

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  ASSERT_FALSE(a.empty());
  size_t first = a.size();
  for (size_t i = 0; i < a.size() && first == a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) first = i;
  }
  EXPECT_EQ(first, a.size()) << "first difference at " << first << ": " << a[first] << " vs "
                             << b[first];
}

void ExpectSameTensors(const GgufFile& mine, const GgufFile& file) {
  EXPECT_EQ(mine.tensors().size(), file.tensors().size());
  for (const TensorInfo& t : file.tensors()) {
    const TensorInfo* m = mine.FindTensor(t.name);
    ASSERT_NE(m, nullptr) << t.name;
    EXPECT_EQ(m->dims, t.dims) << t.name;
    EXPECT_EQ(m->type, t.type) << t.name;
    ASSERT_EQ(m->n_bytes, t.n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(m->data, t.data, t.n_bytes), 0) << t.name;
  }
}

void ExpectSameArchKeys(const GgufFile& mine, const GgufFile& file, const std::string& arch,
                        const std::vector<std::string>& skipped) {
  EXPECT_EQ(mine.GetString("general.architecture").value(), arch);
  const std::string a = arch + ".";
  auto skip = [&](const std::string& key) {
    return std::find(skipped.begin(), skipped.end(), key.substr(a.size())) != skipped.end();
  };
  for (const auto& [key, value] : file.metadata()) {
    if (!key.starts_with(a) || key == a + "vocab_size" || skip(key)) continue;
    const GgufValue* m = mine.Find(key);
    ASSERT_NE(m, nullptr) << key;
    EXPECT_EQ(m->type, value.type) << key;
    EXPECT_EQ(m->array_type, value.array_type) << key;
    EXPECT_EQ(m->array_size, value.array_size) << key;
    EXPECT_EQ(m->u, value.u) << key;
    EXPECT_EQ(m->f, value.f) << key;
    if (value.type == GgufValueType::kArray && m->array_type == value.array_type &&
        m->array_size == value.array_size) {
      const uint64_t bytes = value.array_size * GgufScalarBytes(value.array_type);
      EXPECT_EQ(std::memcmp(m->array_data, value.array_data, bytes), 0) << key;
    }
  }
  for (const auto& [key, value] : mine.metadata()) {
    if (key.starts_with(a) && !skip(key)) {
      EXPECT_NE(file.Find(key), nullptr) << "extra key " << key;
    }
  }
}

}  // namespace kvserve::testing
