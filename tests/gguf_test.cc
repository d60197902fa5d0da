// The GGUF reader against hostile and broken files: every bad file must be refused with an error
// that names the key or tensor and the bad value (never a crash, an assert, a hang or a huge
// allocation), and good files must round-trip through GgufWriter unchanged. Bad files are built
// here: a valid GgufWriter image with bytes patched, or raw bytes written field by field.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/model.h"
#include "model/model_config.h"
#include "support/cli.h"
#include "support/paths.h"
#include "support/test_backend.h"

namespace kvserve {
namespace {

constexpr const char* kName = "test.gguf";
constexpr uint32_t kMagic = 0x46554747;

// Little-endian GGUF fields, appended one by one.
class RawBytes {
 public:
  RawBytes& U32(uint32_t v) { return Put(&v, 4); }
  RawBytes& U64(uint64_t v) { return Put(&v, 8); }
  RawBytes& Str(const std::string& s) {
    U64(s.size());
    return Put(s.data(), s.size());
  }
  RawBytes& Header(uint32_t version, uint64_t n_tensors, uint64_t n_metadata) {
    return U32(kMagic).U32(version).U64(n_tensors).U64(n_metadata);
  }
  RawBytes& PadTo(size_t alignment) {
    bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0);
    return *this;
  }
  RawBytes& Zeros(size_t n) {
    bytes.resize(bytes.size() + n, 0);
    return *this;
  }
  std::vector<uint8_t> bytes;

 private:
  RawBytes& Put(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
};

// Parses a private heap copy of exactly `bytes.size()` bytes, so an over-read past the end is an
// out-of-bounds access that a sanitizer build reports.
struct Parsed {
  std::unique_ptr<uint8_t[]> copy;
  Result<GgufFile> file;
};
Parsed ParseCopy(const std::vector<uint8_t>& bytes) {
  std::unique_ptr<uint8_t[]> copy(bytes.empty() ? nullptr : new uint8_t[bytes.size()]);
  if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
  auto file = GgufFile::Parse(copy.get(), bytes.size(), kName);
  return {std::move(copy), std::move(file)};
}

::testing::AssertionResult HasAll(const std::string& message,
                                  std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "message \"" << message << "\" lacks \"" << part << "\"";
    }
  }
  return ::testing::AssertionSuccess();
}

// The error of parsing `bytes` must contain every part (and the source name).
void ExpectParseError(const std::vector<uint8_t>& bytes, std::initializer_list<std::string> parts) {
  Parsed parsed = ParseCopy(bytes);
  ASSERT_FALSE(parsed.file.ok()) << "a bad file parsed";
  EXPECT_TRUE(HasAll(parsed.file.message(), {std::string(kName) + ": "}));
  EXPECT_TRUE(HasAll(parsed.file.message(), parts));
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A small valid file: scalars, a string, arrays, an F32 matrix and a Q8_0 row.
GgufWriter SmallWriter() {
  GgufWriter writer;
  writer.SetString("general.architecture", "llama");
  writer.SetUint32("count", 7);
  writer.SetInt32("negative", -3);
  writer.SetUint64("big", 1ull << 63);
  writer.SetFloat32("eps", 1e-5f);
  writer.SetBool("flag", true);
  writer.SetStringArray("words", {"a", "bc", ""});
  writer.SetFloat32Array("scores", {0.5f, -1.25f});
  writer.SetInt32Array("ids", {1, -2, 3});
  writer.AddTensor("w", GgmlType::kF32, {4, 2}, FloatBytes({1, 2, 3, 4, 5, 6, 7, 8}));
  writer.AddTensor("q", GgmlType::kQ8_0, {32}, std::vector<uint8_t>(34, 1));
  return writer;
}

// Position of the 8-byte offset field of tensor `name` (with `n_dims` dimensions) in `bytes`.
size_t TensorOffsetField(const std::vector<uint8_t>& bytes, const std::string& name, int n_dims) {
  RawBytes needle;
  needle.Str(name).U32(n_dims);
  auto it = std::search(bytes.begin(), bytes.end(), needle.bytes.begin(), needle.bytes.end());
  EXPECT_NE(it, bytes.end()) << "tensor info of '" << name << "' not found";
  return static_cast<size_t>(it - bytes.begin()) + needle.bytes.size() + 8 * n_dims + 4;
}

void PatchU64(std::vector<uint8_t>& bytes, size_t at, uint64_t value) {
  std::memcpy(bytes.data() + at, &value, 8);
}

// One metadata entry "k" of `type_id` followed by `value` bytes, and nothing else.
std::vector<uint8_t> OneKeyFile(uint32_t type_id, const std::vector<uint8_t>& value) {
  RawBytes raw;
  raw.Header(3, 0, 1).Str("k").U32(type_id);
  raw.bytes.insert(raw.bytes.end(), value.begin(), value.end());
  return raw.bytes;
}

// One tensor "t" with the given raw info fields and `data_bytes` of zeros after the header.
std::vector<uint8_t> OneTensorFile(uint32_t n_dims, const std::vector<uint64_t>& dims,
                                   uint32_t type_id, uint64_t offset, size_t data_bytes) {
  RawBytes raw;
  raw.Header(3, 1, 0).Str("t").U32(n_dims);
  for (uint64_t dim : dims) raw.U64(dim);
  raw.U32(type_id).U64(offset).PadTo(32).Zeros(data_bytes);
  return raw.bytes;
}

TEST(GgufReaderTest, SmallFileParsesWithItsValues) {
  const std::vector<uint8_t> bytes = SmallWriter().Serialize();
  Parsed parsed = ParseCopy(bytes);
  ASSERT_TRUE(parsed.file.ok()) << parsed.file.message();
  const GgufFile& file = *parsed.file;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(*file.GetUint("count"), 7u);
  EXPECT_EQ(*file.GetInt("negative"), -3);
  EXPECT_EQ(*file.GetUint("big"), 1ull << 63);
  EXPECT_FLOAT_EQ(static_cast<float>(*file.GetFloat("eps")), 1e-5f);
  EXPECT_TRUE(*file.GetBool("flag"));
  EXPECT_EQ(*file.GetString("general.architecture"), "llama");
  EXPECT_EQ(*file.GetStringArray("words"), (std::vector<std::string_view>{"a", "bc", ""}));
  EXPECT_EQ(*file.GetFloatArray("scores"), (std::vector<float>{0.5f, -1.25f}));
  EXPECT_EQ(*file.GetIntArray("ids"), (std::vector<int64_t>{1, -2, 3}));
  ASSERT_EQ(file.tensors().size(), 2u);
  const TensorInfo* w = file.FindTensor("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(w->n_bytes, 32u);
  float w7;
  std::memcpy(&w7, w->data + 28, 4);
  EXPECT_EQ(w7, 8.0f);
  EXPECT_EQ(file.FindTensor("q")->n_bytes, 34u);
}

TEST(GgufReaderTest, EmptyFile) { ExpectParseError({}, {"magic", "needs 4 bytes", "0 remain"}); }

TEST(GgufReaderTest, EveryTruncationFailsCleanly) {
  const std::vector<uint8_t> bytes = SmallWriter().Serialize();
  Parsed full = ParseCopy(bytes);
  ASSERT_TRUE(full.file.ok()) << full.file.message();
  // The file is complete once the last tensor's data ends; only the padding after it may go.
  uint64_t data_end = 0;
  for (const TensorInfo& t : full.file->tensors()) {
    data_end = std::max(data_end, full.file->data_offset() + t.offset + t.n_bytes);
  }
  ASSERT_LT(data_end, bytes.size());
  for (size_t size = 0; size < bytes.size(); ++size) {
    const std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + size);
    Parsed parsed = ParseCopy(prefix);
    if (size < data_end) {
      ASSERT_FALSE(parsed.file.ok()) << "a file truncated to " << size << " bytes parsed";
      ASSERT_TRUE(HasAll(parsed.file.message(), {std::string(kName) + ": "})) << size;
      // Either the header ran out ("truncated") or a tensor's data did ("exceeds").
      const std::string& m = parsed.file.message();
      ASSERT_TRUE(m.find("truncated") != std::string::npos ||
                  m.find("exceeds") != std::string::npos)
          << size << ": " << m;
    } else {
      ASSERT_TRUE(parsed.file.ok()) << size << ": " << parsed.file.message();
    }
  }
}

TEST(GgufReaderTest, WrongMagic) {
  std::vector<uint8_t> bytes = SmallWriter().Serialize();
  std::memcpy(bytes.data(), "GGML", 4);
  ExpectParseError(bytes, {"bad magic 0x4c4d4747"});
}

TEST(GgufReaderTest, UnknownVersions) {
  for (uint32_t version : {0u, 1u, 4u, 0xffffffffu}) {
    std::vector<uint8_t> bytes = SmallWriter().Serialize();
    std::memcpy(bytes.data() + 4, &version, 4);
    ExpectParseError(bytes, {"unsupported GGUF version " + std::to_string(version)});
  }
}

TEST(GgufReaderTest, CountsLargerThanTheFile) {
  std::vector<uint8_t> bytes = SmallWriter().Serialize();
  PatchU64(bytes, 16, 1ull << 40);  // metadata count
  ExpectParseError(bytes, {"metadata count 1099511627776", "exceeds"});
  bytes = SmallWriter().Serialize();
  PatchU64(bytes, 8, ~0ull);  // tensor count
  ExpectParseError(bytes, {"tensor count 18446744073709551615", "exceeds"});
  // A count that is merely too large runs out of bytes at the first missing entry.
  RawBytes short_by_two;
  // 39 bytes after the header: enough for 3 minimal entries by size, but it holds only one.
  short_by_two.Header(3, 0, 3).Str("abcdefghijklmnopqrstuvwxyz").U32(0).Zeros(1);
  ExpectParseError(short_by_two.bytes, {"truncated file: metadata key #1 length needs 8 bytes"});
}

TEST(GgufReaderTest, StringLengthsLargerThanTheFile) {
  RawBytes key;
  key.Header(3, 0, 1).U64(1000000).Zeros(16);
  ExpectParseError(key.bytes, {"metadata key #0 length 1000000", "exceeds"});
  RawBytes value;
  value.Header(3, 0, 1).Str("general.name").U32(8).U64(~0ull).Zeros(16);
  ExpectParseError(value.bytes,
                   {"metadata key 'general.name' length 18446744073709551615", "exceeds"});
  RawBytes element;
  element.Header(3, 0, 1).Str("words").U32(9).U32(8).U64(2).Str("ok").U64(1ull << 50);
  ExpectParseError(element.bytes, {"metadata key 'words' element 1 length 1125899906842624"});
  RawBytes tensor_name;
  tensor_name.Header(3, 1, 0).U64(5000).Zeros(64);
  ExpectParseError(tensor_name.bytes, {"name of tensor #0 length 5000"});
}

TEST(GgufReaderTest, HugeArrayCounts) {
  RawBytes numbers;
  numbers.U32(4).U64(1ull << 62).Zeros(32);  // uint32 elements: 2^64 bytes overflows
  ExpectParseError(OneKeyFile(9, numbers.bytes),
                   {"metadata key 'k' array size 4611686018427387904", "exceeds"});
  RawBytes doubles;
  doubles.U32(12).U64(1000).Zeros(32);
  ExpectParseError(OneKeyFile(9, doubles.bytes), {"metadata key 'k' array size 1000"});
  RawBytes strings;
  strings.U32(8).U64(~0ull).Zeros(32);
  ExpectParseError(OneKeyFile(9, strings.bytes),
                   {"metadata key 'k' array size 18446744073709551615"});
}

TEST(GgufReaderTest, UnknownValueTypes) {
  ExpectParseError(OneKeyFile(13, {0, 0, 0, 0}), {"metadata key 'k'", "unknown value type 13"});
  ExpectParseError(OneKeyFile(0x80000000u, {0, 0, 0, 0}), {"unknown value type 2147483648"});
  RawBytes element;
  element.U32(99).U64(1).Zeros(8);
  ExpectParseError(OneKeyFile(9, element.bytes),
                   {"metadata key 'k'", "unsupported array element type 99"});
}

TEST(GgufReaderTest, NestedArrays) {
  RawBytes nested;
  nested.U32(9).U64(1).U32(4).U64(1).U32(5);
  ExpectParseError(OneKeyFile(9, nested.bytes),
                   {"metadata key 'k'", "unsupported array element type 9"});
}

TEST(GgufReaderTest, DuplicateKey) {
  RawBytes raw;
  raw.Header(3, 0, 2).Str("llama.block_count").U32(4).U32(5);
  raw.Str("llama.block_count").U32(4).U32(6);
  ExpectParseError(raw.bytes, {"duplicate metadata key 'llama.block_count'"});
}

TEST(GgufReaderTest, DuplicateTensorName) {
  GgufWriter writer;
  writer.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {2}, FloatBytes({1, 2}));
  writer.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {2}, FloatBytes({3, 4}));
  ExpectParseError(writer.Serialize(), {"duplicate tensor name 'blk.0.attn_q.weight'"});
}

TEST(GgufReaderTest, BadAlignment) {
  for (uint32_t alignment : {0u, 3u, 48u, 1u << 30}) {
    GgufWriter writer = SmallWriter();
    writer.SetUint32("general.alignment", alignment);
    ExpectParseError(writer.Serialize(),
                     {"'general.alignment' = " + std::to_string(alignment), "power of two"});
  }
  GgufWriter negative = SmallWriter();
  negative.SetInt32("general.alignment", -32);
  ExpectParseError(negative.Serialize(), {"'general.alignment' = 18446744073709551584"});
  GgufWriter text = SmallWriter();
  text.SetString("general.alignment", "32");
  ExpectParseError(text.Serialize(), {"'general.alignment' has type string"});
  GgufWriter floating = SmallWriter();
  floating.SetFloat32("general.alignment", 32.0f);
  ExpectParseError(floating.Serialize(), {"'general.alignment' has type float32"});
}

TEST(GgufReaderTest, GoodAlignmentIsHonoured) {
  GgufWriter writer(64);
  writer.AddTensor("a", GgmlType::kF32, {3}, FloatBytes({1, 2, 3}));
  writer.AddTensor("b", GgmlType::kF32, {1}, FloatBytes({4}));
  Parsed parsed = ParseCopy(writer.Serialize());
  ASSERT_TRUE(parsed.file.ok()) << parsed.file.message();
  EXPECT_EQ(parsed.file->alignment(), 64u);
  EXPECT_EQ(parsed.file->data_offset() % 64, 0u);
  EXPECT_EQ(parsed.file->FindTensor("b")->offset, 64u);
}

TEST(GgufReaderTest, TensorDataOutsideTheFile) {
  std::vector<uint8_t> bytes = SmallWriter().Serialize();
  PatchU64(bytes, TensorOffsetField(bytes, "q", 1), 1ull << 40);
  ExpectParseError(bytes, {"tensor 'q': data offset 1099511627776 + size 34 exceeds"});
  bytes = SmallWriter().Serialize();
  PatchU64(bytes, TensorOffsetField(bytes, "q", 1), ~0ull << 5);  // aligned, overflows the add
  ExpectParseError(bytes, {"tensor 'q': data offset 18446744073709551584"});
  // Declared larger than its data.
  GgufWriter writer;
  writer.AddTensor("token_embd.weight", GgmlType::kF32, {64, 512}, FloatBytes({1, 2}));
  ExpectParseError(writer.Serialize(), {"tensor 'token_embd.weight'", "size 131072 exceeds"});
}

TEST(GgufReaderTest, MisalignedTensorOffset) {
  std::vector<uint8_t> bytes = SmallWriter().Serialize();
  PatchU64(bytes, TensorOffsetField(bytes, "q", 1), 36);
  ExpectParseError(bytes, {"tensor 'q' offset 36 is not a multiple of the alignment 32"});
}

TEST(GgufReaderTest, BadDimensions) {
  ExpectParseError(OneTensorFile(2, {1ull << 32, 1ull << 32}, 0, 0, 0),
                   {"tensor 't' dimensions 4294967296 x 4294967296 overflow"});
  ExpectParseError(OneTensorFile(1, {1ull << 63}, 0, 0, 0),
                   {"tensor 't' dimension 0 = 9223372036854775808 is out of range"});
  // The element count fits in int64 but its byte size does not fit in uint64.
  ExpectParseError(OneTensorFile(2, {1ull << 31, 1ull << 31}, 0, 0, 64),
                   {"tensor 't' size of 4611686018427387904 F32 elements overflows"});
  ExpectParseError(OneTensorFile(3, {4, 0, 2}, 0, 0, 64),
                   {"tensor 't' dimension 1 = 0 is out of range"});
  ExpectParseError(OneTensorFile(0, {}, 0, 0, 64), {"tensor 't' has 0 dimensions"});
  ExpectParseError(OneTensorFile(5, {1, 1, 1, 1, 1}, 0, 0, 64), {"tensor 't' has 5 dimensions"});
  ExpectParseError(OneTensorFile(0xffffffffu, {1, 1}, 0, 0, 64),
                   {"tensor 't' has 4294967295 dimensions"});
}

TEST(GgufReaderTest, UnknownTensorType) {
  for (uint32_t type : {4u, 5u, 29u, 1000u}) {
    ExpectParseError(OneTensorFile(1, {4}, type, 0, 64),
                     {"tensor 't' has unknown tensor type " + std::to_string(type)});
  }
}

TEST(GgufReaderTest, RowLengthNotAMultipleOfTheBlock) {
  ExpectParseError(OneTensorFile(2, {33, 2}, 8, 0, 256),
                   {"tensor 't' row length 33 is not a multiple of the Q8_0 block size 32"});
  ExpectParseError(OneTensorFile(1, {16}, 2, 0, 256), {"row length 16", "Q4_0 block size 32"});
  ASSERT_TRUE(ParseCopy(OneTensorFile(2, {64, 2}, 8, 0, 256)).file.ok());
}

TEST(GgufReaderTest, TypedGettersRefuseWrongTypesAndMissingKeys) {
  const std::vector<uint8_t> bytes = SmallWriter().Serialize();
  Parsed parsed = ParseCopy(bytes);
  ASSERT_TRUE(parsed.file.ok());
  const GgufFile& f = *parsed.file;
  EXPECT_TRUE(HasAll(f.GetUint("general.architecture").message(),
                     {"'general.architecture' has type string, expected an unsigned integer"}));
  EXPECT_TRUE(HasAll(f.GetInt("eps").message(), {"'eps' has type float32, expected an integer"}));
  EXPECT_TRUE(HasAll(f.GetFloat("count").message(), {"'count' has type uint32, expected float32"}));
  EXPECT_TRUE(HasAll(f.GetBool("count").message(), {"'count' has type uint32, expected bool"}));
  EXPECT_TRUE(HasAll(f.GetString("words").message(), {"'words' has type array, expected string"}));
  EXPECT_TRUE(HasAll(f.GetStringArray("scores").message(), {"'scores'", "array of string"}));
  EXPECT_TRUE(HasAll(f.GetStringArray("count").message(), {"'count' has type uint32"}));
  EXPECT_TRUE(HasAll(f.GetFloatArray("words").message(), {"'words'", "array of float32"}));
  EXPECT_TRUE(HasAll(f.GetIntArray("scores").message(), {"'scores'", "array of integers"}));
  EXPECT_TRUE(HasAll(f.GetUint("negative").message(), {"'negative' = -3 must not be negative"}));
  EXPECT_TRUE(HasAll(f.GetInt("big").message(), {"'big' = 9223372036854775808 is out of range"}));
  for (auto message : {f.GetUint("nope").message(), f.GetString("nope").message(),
                       f.GetFloatArray("nope").message(), f.GetBool("nope").message()}) {
    EXPECT_TRUE(HasAll(message, {"test.gguf: missing required metadata key 'nope'"}));
  }
  EXPECT_EQ(*f.GetUintOr("nope", 11), 11u);
  EXPECT_EQ(*f.GetFloatOr("nope", 0.25), 0.25);
  EXPECT_FALSE(*f.GetBoolOr("nope", false));
  EXPECT_TRUE(HasAll(f.GetUintOr("eps", 1).message(), {"'eps' has type float32"}));
  EXPECT_TRUE(HasAll(f.GetFloatOr("general.architecture", 1).message(), {"type string"}));
  EXPECT_TRUE(HasAll(f.GetBoolOr("eps", true).message(), {"'eps' has type float32"}));
  EXPECT_EQ(f.Find("nope"), nullptr);
  EXPECT_EQ(f.FindTensor("nope"), nullptr);
}

TEST(GgufReaderTest, OpenReportsThePath) {
  const std::string path = testing::TempDir() + "/truncated.gguf";
  std::vector<uint8_t> bytes = SmallWriter().Serialize();
  bytes.resize(40);
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 40);
  auto file = GgufFile::Open(path);
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(HasAll(file.message(), {path + ": metadata count 9 exceeds"}));

  const std::string empty = testing::TempDir() + "/empty.gguf";
  std::ofstream(empty, std::ios::binary).close();
  auto empty_file = GgufFile::Open(empty);
  ASSERT_FALSE(empty_file.ok());
  EXPECT_TRUE(HasAll(empty_file.message(), {empty + ": truncated file", "magic"}));

  auto missing = GgufFile::Open(testing::TempDir() + "/missing.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(HasAll(missing.message(), {"cannot open", "missing.gguf"}));
  auto directory = GgufFile::Open(testing::TempDir());
  ASSERT_FALSE(directory.ok());
  EXPECT_TRUE(HasAll(directory.message(), {"is not a regular file"}));

  const std::string good = testing::TempDir() + "/good.gguf";
  ASSERT_TRUE(SmallWriter().WriteFile(good).ok());
  auto opened = GgufFile::Open(good);
  ASSERT_TRUE(opened.ok()) << opened.message();
  EXPECT_EQ(*opened->GetUint("count"), 7u);
}

// ---- Writer: streamed tensors --------------------------------------------------------------

TEST(GgufWriterTest, StreamedTensorsMatchInMemoryOnes) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6, 7, 8};
  GgufWriter memory;
  memory.AddTensor("w", GgmlType::kF32, {4, 2}, FloatBytes(values));
  GgufWriter streamed;
  streamed.AddTensor("w", GgmlType::kF32, {4, 2}, [&](const ByteSink& sink) {
    const std::vector<uint8_t> bytes = FloatBytes(values);
    KVSERVE_RETURN_IF_ERROR(sink(bytes.data(), 12));  // in two uneven pieces
    return sink(bytes.data() + 12, bytes.size() - 12);
  });
  EXPECT_EQ(memory.Serialize(), streamed.Serialize());
}

TEST(GgufWriterTest, StreamedTensorOfTheWrongSizeFailsTheWrite) {
  for (size_t n : {28u, 36u}) {
    GgufWriter writer;
    writer.AddTensor("blk.0.ffn_up.weight", GgmlType::kF32, {4, 2}, [n](const ByteSink& sink) {
      const std::vector<uint8_t> bytes(n, 0);
      return sink(bytes.data(), bytes.size());
    });
    const Status status = writer.WriteTo([](const uint8_t*, size_t) { return Status::Ok(); });
    ASSERT_FALSE(status.ok());
    EXPECT_TRUE(HasAll(status.message(), {"tensor 'blk.0.ffn_up.weight': producer wrote " +
                                          std::to_string(n) + " bytes, expected 32"}));
    EXPECT_TRUE(writer.Serialize().empty());
    const std::string path = testing::TempDir() + "/failed.gguf";
    EXPECT_FALSE(writer.WriteFile(path).ok());
    EXPECT_FALSE(std::ifstream(path).good()) << "a failed write left a file behind";
    EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  }
}

// ---- Model level ---------------------------------------------------------------------------

// A copy of a model file with one change: `edit` may drop or alter metadata and tensors.
struct ModelEdit {
  std::string drop_key;
  std::string drop_tensor;
  std::function<void(GgufWriter&)> extra;
};

std::vector<uint8_t> EditedModel(const GgufFile& source, const ModelEdit& edit) {
  GgufWriter writer(source.alignment());
  for (const auto& [key, value] : source.metadata()) {
    if (key != edit.drop_key) writer.CopyValue(key, value);
  }
  for (const TensorInfo& t : source.tensors()) {
    if (t.name == edit.drop_tensor) continue;
    writer.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  if (edit.extra) edit.extra(writer);
  return writer.Serialize();
}

// Loads `bytes` as a model; returns the error message ("" when it loads).
std::string ModelError(const std::vector<uint8_t>& bytes) {
  Parsed parsed = ParseCopy(bytes);
  if (!parsed.file.ok()) return "parse: " + parsed.file.message();
  auto model = LoadModel(std::move(parsed.file).value(), TestBackend());
  return model.ok() ? "" : model.message();
}

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = GgufFile::Open(testing::ModelPath("stories260K.gguf"));
    ASSERT_TRUE(file.ok()) << file.message();
    stories_ = std::make_unique<GgufFile>(std::move(file).value());
  }
  std::unique_ptr<GgufFile> stories_;
};

TEST_F(ModelFileTest, UnchangedCopyLoads) { EXPECT_EQ(ModelError(EditedModel(*stories_, {})), ""); }

TEST_F(ModelFileTest, MissingRequiredKey) {
  for (const char* key : {"llama.block_count", "llama.embedding_length",
                          "llama.attention.layer_norm_rms_epsilon", "general.architecture"}) {
    EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.drop_key = key})),
                       {"test.gguf: missing required metadata key '" + std::string(key) + "'"}));
  }
}

TEST_F(ModelFileTest, KeyOfWrongType) {
  auto as_string = [](GgufWriter& w) { w.SetString("llama.block_count", "5"); };
  EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.extra = as_string})),
                     {"'llama.block_count' has type string, expected an unsigned integer"}));
  auto as_int = [](GgufWriter& w) { w.SetUint32("llama.attention.layer_norm_rms_epsilon", 1); };
  EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.extra = as_int})),
                     {"'llama.attention.layer_norm_rms_epsilon' has type uint32"}));
  auto zero_layers = [](GgufWriter& w) { w.SetUint32("llama.block_count", 0); };
  EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.extra = zero_layers})),
                     {"'llama.block_count' = 0 is out of range"}));
  auto bad_heads = [](GgufWriter& w) { w.SetUint32("llama.attention.head_count", 7); };
  EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.extra = bad_heads})),
                     {"embedding_length 64 is not a multiple of head_count 7"}));
}

TEST_F(ModelFileTest, MissingTensor) {
  for (const char* name : {"blk.2.ffn_up.weight", "output_norm.weight", "token_embd.weight"}) {
    EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.drop_tensor = name})),
                       {"missing required tensor '" + std::string(name) + "'"}));
  }
}

TEST_F(ModelFileTest, TensorOfWrongShapeOrType) {
  auto narrow_q = [](GgufWriter& w) {
    w.AddTensor("blk.0.attn_q.weight", GgmlType::kF32, {64, 32},
                std::vector<uint8_t>(64 * 32 * 4, 0));
  };
  EXPECT_TRUE(HasAll(
      ModelError(EditedModel(*stories_, {.drop_tensor = "blk.0.attn_q.weight", .extra = narrow_q})),
      {"tensor 'blk.0.attn_q.weight' has shape [64, 32], expected [64, 64]"}));
  auto long_norm = [](GgufWriter& w) {
    w.AddTensor("blk.3.ffn_norm.weight", GgmlType::kF32, {65}, std::vector<uint8_t>(65 * 4, 0));
  };
  EXPECT_TRUE(HasAll(ModelError(EditedModel(
                         *stories_, {.drop_tensor = "blk.3.ffn_norm.weight", .extra = long_norm})),
                     {"tensor 'blk.3.ffn_norm.weight' has shape [65], expected [64]"}));
  auto k_quant = [](GgufWriter& w) {
    w.AddTensor("blk.1.attn_k.weight", GgmlType::kQ4_K, {256, 8}, std::vector<uint8_t>(8 * 144));
  };
  EXPECT_TRUE(HasAll(
      ModelError(EditedModel(*stories_, {.drop_tensor = "blk.1.attn_k.weight", .extra = k_quant})),
      {"tensor 'blk.1.attn_k.weight' has shape [256, 8], expected [64, 32]"}));
  // Q8_1 is a GGML type (an activation format) but never a weight kvserve computes with.
  auto q8_1 = [](GgufWriter& w) {
    w.AddTensor("blk.1.attn_k.weight", GgmlType::kQ8_1, {64, 32}, std::vector<uint8_t>(64 * 36));
  };
  EXPECT_TRUE(HasAll(
      ModelError(EditedModel(*stories_, {.drop_tensor = "blk.1.attn_k.weight", .extra = q8_1})),
      {"tensor 'blk.1.attn_k.weight' has type Q8_1, which kvserve cannot compute with"}));
}

TEST_F(ModelFileTest, UnsupportedArchitecture) {
  auto mamba = [](GgufWriter& w) { w.SetString("general.architecture", "mamba"); };
  // The list's parts, so that an architecture added anywhere in the registry keeps this passing.
  EXPECT_TRUE(HasAll(ModelError(EditedModel(*stories_, {.extra = mamba})),
                     {"unsupported architecture 'mamba'", "(supported: ", "llama", "gpt2",
                      "qwen2, ", "qwen3, ", "phi3", "gemma2", "gemma3", "qwen3moe"}));
}

TEST_F(ModelFileTest, InfoCommandRefusesABadFileWithOneLine) {
  std::vector<uint8_t> bytes = EditedModel(*stories_, {.drop_tensor = "blk.4.ffn_down.weight"});
  const std::string path = testing::TempDir() + "/no_ffn_down.gguf";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  std::string out, err;
  EXPECT_NE(testing::RunKvserve("info " + path, &out, &err), 0);
  EXPECT_EQ(out, "");
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(
      HasAll(err, {"kvserve info: " + path, "missing required tensor 'blk.4.ffn_down.weight'"}));

  bytes.resize(1000);
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), 1000);
  EXPECT_NE(testing::RunKvserve("info " + path, &out, &err), 0);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE(HasAll(err, {"kvserve info: " + path + ": ", "tokenizer.ggml."}));

  EXPECT_EQ(testing::RunKvserve("info " + testing::ModelPath("stories260K.gguf"), &out, &err), 0)
      << err;
  EXPECT_TRUE(
      HasAll(out, {"architecture:  llama", "tokenizer:     llama, 512 tokens, BOS <s> (1) added"}));
}

// ---- Good files round-trip -----------------------------------------------------------------

// Bytes of an array value's elements, as stored.
std::string_view ArrayBytes(const GgufValue& v) {
  uint64_t n = 0;
  if (v.array_type == GgufValueType::kString) {
    for (uint64_t i = 0; i < v.array_size; ++i) {
      uint64_t length;
      std::memcpy(&length, v.array_data + n, 8);
      n += 8 + length;
    }
  } else {
    const uint64_t sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    n = v.array_size * sizes[static_cast<int>(v.array_type)];
  }
  return {reinterpret_cast<const char*>(v.array_data), n};
}

void ExpectSameFile(const GgufFile& a, const GgufFile& b) {
  ASSERT_EQ(a.metadata().size(), b.metadata().size());
  for (const auto& [key, va] : a.metadata()) {
    const GgufValue* vb = b.Find(key);
    ASSERT_NE(vb, nullptr) << key;
    EXPECT_EQ(va.type, vb->type) << key;
    EXPECT_EQ(va.u, vb->u) << key;
    EXPECT_EQ(va.i, vb->i) << key;
    EXPECT_EQ(std::memcmp(&va.f, &vb->f, sizeof(double)), 0) << key;
    EXPECT_EQ(va.str, vb->str) << key;
    if (va.type == GgufValueType::kArray) {
      EXPECT_EQ(va.array_type, vb->array_type) << key;
      EXPECT_EQ(va.array_size, vb->array_size) << key;
      EXPECT_TRUE(ArrayBytes(va) == ArrayBytes(*vb)) << key;
    }
  }
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (size_t i = 0; i < a.tensors().size(); ++i) {
    const TensorInfo& ta = a.tensors()[i];
    const TensorInfo& tb = b.tensors()[i];
    EXPECT_EQ(ta.name, tb.name);
    EXPECT_EQ(ta.type, tb.type) << ta.name;
    EXPECT_EQ(ta.dims, tb.dims) << ta.name;
    ASSERT_EQ(ta.n_bytes, tb.n_bytes) << ta.name;
    EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.n_bytes), 0) << ta.name;
  }
}

TEST(GgufRoundTripTest, SharedFilesRoundTripThroughTheWriter) {
  for (const char* name : {"stories260K.gguf", "gpt2-tiny-f32.gguf", "ggml-vocab-gpt-2.gguf",
                           "ggml-vocab-llama-spm.gguf"}) {
    SCOPED_TRACE(name);
    auto original = GgufFile::Open(testing::ModelPath(name));
    ASSERT_TRUE(original.ok()) << original.message();
    const std::vector<uint8_t> bytes = EditedModel(*original, {});
    Parsed copy = ParseCopy(bytes);
    ASSERT_TRUE(copy.file.ok()) << copy.file.message();
    ExpectSameFile(*original, *copy.file);
    if (!original->tensors().empty()) {
      EXPECT_EQ(ModelError(bytes), "");
    }
  }
}

TEST(GgufRoundTripTest, SharedModelsParseAndLoad) {
  auto stories = LoadModel(testing::ModelPath("stories260K.gguf"), TestBackend());
  ASSERT_TRUE(stories.ok()) << stories.message();
  EXPECT_EQ((*stories)->config().n_layers, 5);
  EXPECT_EQ((*stories)->config().n_vocab, 512);
  auto gpt2 = LoadModel(testing::ModelPath("gpt2-tiny-f32.gguf"), TestBackend());
  ASSERT_TRUE(gpt2.ok()) << gpt2.message();
  EXPECT_EQ((*gpt2)->config().arch, "gpt2");
  EXPECT_EQ((*gpt2)->config().n_vocab, 50257);
}

}  // namespace
}  // namespace kvserve
