// SafetensorsFile and SafetensorsSet: good files parse with the right shapes, types and data
// pointers; every broken-header rule gives an error naming the tensor and the bad values;
// sharded folders resolve through model.safetensors.index.json.
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "io/safetensors.h"
#include "support/paths.h"
#include "support/safetensors_builder.h"

namespace kvserve {
namespace {

using ::testing::HasSubstr;
using testing::SafetensorsBuilder;

Result<SafetensorsFile> ParseRaw(const std::string& header, const std::vector<uint8_t>& data,
                                 std::vector<uint8_t>* keep) {
  *keep = SafetensorsBuilder::Raw(header, data);
  return SafetensorsFile::Parse(keep->data(), keep->size(), "t.safetensors");
}

// The error of parsing `header` over `data_bytes` zero bytes (the parse must fail).
std::string ErrorOf(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> keep;
  auto file = ParseRaw(header, std::vector<uint8_t>(data_bytes), &keep);
  EXPECT_FALSE(file.ok()) << header;
  return file.ok() ? "" : file.message();
}

TEST(SafetensorsTest, ParsesTypesShapesAndData) {
  SafetensorsBuilder builder;
  builder.AddF32("a", {2, 3}, {0, 1, 2, 3, 4, 5});
  builder.Add("b", "F16", {4}, std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  builder.Add("c", "BF16", {1, 1, 2}, std::vector<uint8_t>{9, 10, 11, 12});
  builder.Add("empty", "F32", {0, 5}, {});
  const std::vector<uint8_t> bytes = builder.Build();
  auto file = SafetensorsFile::Parse(bytes.data(), bytes.size(), "x");
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_EQ(file->tensors().size(), 4u);
  const SafetensorsTensor* a = file->Find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->type, GgmlType::kF32);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->n_elements, 6u);
  EXPECT_EQ(a->n_bytes, 24u);
  float values[6];
  std::memcpy(values, a->data, sizeof(values));
  EXPECT_EQ(values[5], 5.0f);
  const SafetensorsTensor* b = file->Find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->type, GgmlType::kF16);
  EXPECT_EQ(b->data[0], 1);
  EXPECT_EQ(b->data, a->data + 24);
  EXPECT_EQ(file->Find("c")->type, GgmlType::kBF16);
  EXPECT_EQ(file->Find("c")->data[3], 12);
  EXPECT_EQ(file->Find("empty")->n_bytes, 0u);
  EXPECT_EQ(file->Find("__metadata__"), nullptr);
  EXPECT_EQ(file->Find("missing"), nullptr);
}

TEST(SafetensorsTest, EmptyHeaderObjectIsAnEmptyFile) {
  std::vector<uint8_t> keep;
  auto file = ParseRaw("{}", {}, &keep);
  ASSERT_TRUE(file.ok()) << file.message();
  EXPECT_TRUE(file->tensors().empty());
}

TEST(SafetensorsTest, TooShortForTheLength) {
  const std::vector<uint8_t> bytes = {1, 0, 0};
  auto file = SafetensorsFile::Parse(bytes.data(), bytes.size(), "t");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.message(), HasSubstr("too short"));
}

TEST(SafetensorsTest, HeaderLengthOverTheLimit) {
  std::vector<uint8_t> bytes(16, 0);
  const uint64_t length = SafetensorsFile::kMaxHeaderBytes + 1;
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(length >> (8 * i));
  auto file = SafetensorsFile::Parse(bytes.data(), bytes.size(), "t");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.message(), HasSubstr("header length " + std::to_string(length)));
  EXPECT_THAT(file.message(), HasSubstr("limit"));
}

TEST(SafetensorsTest, HeaderLongerThanTheFile) {
  std::vector<uint8_t> bytes = SafetensorsBuilder::Raw("{}", {});
  bytes[0] = 200;  // claims 200 header bytes, 2 present
  auto file = SafetensorsFile::Parse(bytes.data(), bytes.size(), "t");
  ASSERT_FALSE(file.ok());
  EXPECT_THAT(file.message(), HasSubstr("header length 200 exceeds the 2 bytes"));
}

TEST(SafetensorsTest, InvalidJson) {
  EXPECT_THAT(ErrorOf("{\"a\": {\"dtype\": ", 0), HasSubstr("not valid JSON"));
  EXPECT_THAT(ErrorOf("[1, 2]", 0), HasSubstr("not a JSON object"));
  EXPECT_THAT(ErrorOf("{\"a\": 5}", 0), HasSubstr("'a': header entry is not an object"));
}

TEST(SafetensorsTest, UnknownDtypeIsRefusedByName) {
  const std::string message =
      ErrorOf(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", 8);
  EXPECT_THAT(message, HasSubstr("tensor 'w'"));
  EXPECT_THAT(message, HasSubstr("dtype 'F64' is not supported"));
  EXPECT_THAT(ErrorOf(R"({"w": {"shape": [1], "data_offsets": [0, 4]}})", 4),
              HasSubstr("missing string field 'dtype'"));
}

TEST(SafetensorsTest, BadShapes) {
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
              HasSubstr("shape entry -1 is not a non-negative integer"));
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
              HasSubstr("shape entry 1.5"));
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": 4, "data_offsets": [0, 4]}})", 4),
              HasSubstr("missing array field 'shape'"));
}

TEST(SafetensorsTest, ShapeSizeMismatch) {
  const std::string message =
      ErrorOf(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})", 20);
  EXPECT_THAT(message, HasSubstr("tensor 'w'"));
  EXPECT_THAT(message, HasSubstr("[0, 20] hold 20 bytes but shape [2,3] in F32 needs 24"));
}

TEST(SafetensorsTest, ShapeOverflow) {
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296],
                       "data_offsets": [0, 4]}})",
                      4),
              HasSubstr("overflows"));
  // Fits int64 as an element count, overflows as bytes.
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [4611686018427387904],
                       "data_offsets": [0, 4]}})",
                      4),
              HasSubstr("overflows"));
}

TEST(SafetensorsTest, OffsetsOutOfOrder) {
  const std::string message =
      ErrorOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4);
  EXPECT_THAT(message, HasSubstr("data_offsets [4, 0] are out of order"));
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4),
              HasSubstr("'data_offsets' must be [begin, end]"));
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4),
              HasSubstr("'data_offsets' must be [begin, end]"));
}

TEST(SafetensorsTest, Overlap) {
  const std::string message =
      ErrorOf(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
              12);
  EXPECT_THAT(message, HasSubstr("tensor 'b' data [4, 12) overlaps tensor 'a', which ends at 8"));
}

TEST(SafetensorsTest, Gap) {
  const std::string message =
      ErrorOf(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
              12);
  EXPECT_THAT(message, HasSubstr("tensor 'b' data [8, 12) leaves a gap"));
  EXPECT_THAT(message, HasSubstr("'a' ends at 4"));
  EXPECT_THAT(ErrorOf(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
              HasSubstr("tensor 'a' data [4, 8) leaves a gap"));
}

TEST(SafetensorsTest, OutsideTheFile) {
  const std::string message =
      ErrorOf(R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 12);
  EXPECT_THAT(message, HasSubstr("tensor 'w' data [0, 16) extends past the data section of 12"));
}

TEST(SafetensorsTest, TrailingBytes) {
  EXPECT_THAT(ErrorOf(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})", 6),
              HasSubstr("tensors cover 4 bytes of a data section of 6"));
}

TEST(SafetensorsTest, OpensAMappedFile) {
  const std::string path = testing::TempDir() + "/single.safetensors";
  SafetensorsBuilder builder;
  builder.AddF32("x", {3}, {1.5f, 2.5f, 3.5f});
  ASSERT_TRUE(builder.WriteFile(path));
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.message();
  ASSERT_NE(file->mapping(), nullptr);
  float value = 0;
  std::memcpy(&value, file->Find("x")->data + 8, 4);
  EXPECT_EQ(value, 3.5f);
  EXPECT_FALSE(SafetensorsFile::Open(path + ".missing").ok());
}

class ShardedFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir() + "/sharded-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
    SafetensorsBuilder one, two;
    one.AddF32("a", {2}, {1, 2});
    two.AddF32("b", {1}, {3});
    ASSERT_TRUE(one.WriteFile(dir_ + "/model-00001-of-00002.safetensors"));
    ASSERT_TRUE(two.WriteFile(dir_ + "/model-00002-of-00002.safetensors"));
  }
  void WriteIndex(const std::string& weight_map) {
    ASSERT_TRUE(testing::WriteText(dir_ + "/model.safetensors.index.json",
                                   R"({"metadata": {}, "weight_map": )" + weight_map + "}"));
  }
  std::string dir_;
};

TEST_F(ShardedFolder, ResolvesTensorsAcrossShards) {
  WriteIndex(
      R"({"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"})");
  auto set = SafetensorsSet::OpenFolder(dir_);
  ASSERT_TRUE(set.ok()) << set.message();
  ASSERT_NE(set->Find("a"), nullptr);
  ASSERT_NE(set->Find("b"), nullptr);
  float value = 0;
  std::memcpy(&value, set->Find("b")->data, 4);
  EXPECT_EQ(value, 3.0f);
  EXPECT_EQ(set->tensors().size(), 2u);
  EXPECT_NE(set->keep_alive(), nullptr);
}

TEST_F(ShardedFolder, MissingShardAndMissingTensor) {
  WriteIndex(R"({"a": "model-00001-of-00002.safetensors", "b": "model-00003.safetensors"})");
  auto set = SafetensorsSet::OpenFolder(dir_);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("model-00003.safetensors"));
  WriteIndex(
      R"({"a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"})");
  set = SafetensorsSet::OpenFolder(dir_);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("tensor 'c' is not in"));
  WriteIndex(R"({"a": "../model-00001-of-00002.safetensors"})");
  set = SafetensorsSet::OpenFolder(dir_);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("is not a file name in the folder"));
  WriteIndex(R"([1])");
  EXPECT_THAT(SafetensorsSet::OpenFolder(dir_).message(), HasSubstr("missing object 'weight_map'"));
}

TEST_F(ShardedFolder, DuplicateTensorAcrossShards) {
  SafetensorsBuilder again;
  again.AddF32("a", {1}, {7});
  ASSERT_TRUE(again.WriteFile(dir_ + "/model-00002-of-00002.safetensors"));
  WriteIndex(
      R"({"a": "model-00001-of-00002.safetensors", "x": "model-00002-of-00002.safetensors"})");
  auto set = SafetensorsSet::OpenFolder(dir_);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("tensor 'a' also appears in another shard"));
}

TEST(SafetensorsSetTest, FolderWithoutWeights) {
  const std::string dir = testing::TempDir() + "/no-weights";
  std::filesystem::create_directories(dir);
  auto set = SafetensorsSet::OpenFolder(dir);
  ASSERT_FALSE(set.ok());
  EXPECT_THAT(set.message(), HasSubstr("neither model.safetensors.index.json nor"));
}

}  // namespace
}  // namespace kvserve
