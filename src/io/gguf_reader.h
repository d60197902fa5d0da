// Reads a GGUF file (versions 2 and 3) from a memory mapping. Every count, length, offset and size
// in the file is checked (overflow-safe) before it is used, so a truncated or hostile file yields
// an error naming the key or tensor and the bad value, never a crash or a huge allocation.
// Tensor data is not copied: TensorInfo::data points into the mapping owned by GgufFile.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/ggml_type.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace kvserve {

enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

const char* GgufValueTypeName(GgufValueType type);
// Bytes of one scalar element of `type`; 0 for string and array.
uint64_t GgufScalarBytes(GgufValueType type);

// One metadata value. Scalars are decoded; strings and arrays point into the mapping.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  uint64_t u = 0;  // unsigned integers and bool
  int64_t i = 0;   // signed integers
  double f = 0;    // floats
  std::string_view str;
  // Arrays: element type, count and the raw bytes of the elements (strings stay length-prefixed).
  GgufValueType array_type = GgufValueType::kUint8;
  uint64_t array_size = 0;
  const uint8_t* array_data = nullptr;
};

struct TensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> dims;  // GGML order: dims[0] is the innermost (contiguous) dimension
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t offset = 0;  // from the start of the data section
  const uint8_t* data = nullptr;

  int64_t dim(size_t i) const { return i < dims.size() ? dims[i] : 1; }
  std::string ShapeString() const;
};

class GgufFile {
 public:
  static Result<GgufFile> Open(const std::string& path);
  // Parses an in-memory image (used by tests and the fuzzer); `bytes` must outlive the GgufFile.
  static Result<GgufFile> Parse(const uint8_t* bytes, uint64_t size, std::string source_name);
  // A GGUF-equivalent view assembled in memory (a Hugging Face folder, see model/hf_folder.h).
  // `metadata_image` is a GGUF image with metadata and no tensors (GgufWriter::Serialize); it is
  // parsed, validated and owned. Each tensor gives name, type, dims and `data`, which must point
  // at its bytes and stay valid while `keep_alive` lives; n_elements, n_bytes and offset are
  // computed here. Errors name the tensor and the bad value.
  static Result<GgufFile> FromParts(std::vector<uint8_t> metadata_image,
                                    std::vector<TensorInfo> tensors,
                                    std::shared_ptr<const void> keep_alive,
                                    std::string source_name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  uint64_t data_offset() const { return data_offset_; }
  const std::string& path() const { return source_name_; }

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const GgufValue* Find(std::string_view key) const;
  const TensorInfo* FindTensor(std::string_view name) const;

  // Typed getters: an error names the key, its actual type and the expected one.
  // Integer getters accept any integer type whose value fits.
  Result<uint64_t> GetUint(std::string_view key) const;
  Result<int64_t> GetInt(std::string_view key) const;
  Result<double> GetFloat(std::string_view key) const;
  Result<bool> GetBool(std::string_view key) const;
  Result<std::string_view> GetString(std::string_view key) const;
  Result<std::vector<std::string_view>> GetStringArray(std::string_view key) const;
  Result<std::vector<float>> GetFloatArray(std::string_view key) const;
  Result<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  // Same as the getters above, but a missing key yields `fallback` (a wrong type is still an
  // error).
  Result<uint64_t> GetUintOr(std::string_view key, uint64_t fallback) const;
  Result<double> GetFloatOr(std::string_view key, double fallback) const;
  Result<bool> GetBoolOr(std::string_view key, bool fallback) const;

  // Drops tensor bytes that have been copied elsewhere from resident memory, when this file is a
  // mapping (MappedFile::ReleasePages); does nothing for in-memory files (FromParts).
  void ReleasePages(const uint8_t* p, size_t bytes) const;

 private:
  friend class GgufParser;
  Result<const GgufValue*> Require(std::string_view key) const;

  std::shared_ptr<MappedFile> mapping_;     // keeps TensorInfo::data and string views alive
  std::shared_ptr<const void> keep_alive_;  // FromParts: the metadata image and tensor storage
  const uint8_t* bytes_ = nullptr;
  uint64_t size_ = 0;
  std::string source_name_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace kvserve
