// Reads Hugging Face safetensors files from a memory mapping, validating the whole header before
// any tensor is touched.
//
// File layout: an 8-byte little-endian header length N, N bytes of JSON header, then the data
// section. The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)}
// with offsets relative to the data section; "__metadata__" (free-form strings) is ignored.
// Checks: N <= kMaxHeaderBytes and fits the file; the JSON parses into an object; dtype is F32,
// F16 or BF16 (others are refused by name); shape entries are non-negative integers whose product
// times the element size does not overflow and equals end - begin; sorted by begin, the tensors
// cover the data section exactly (first begins at 0, each begins where the previous ended, the
// last ends at the end of the file): no gaps, overlaps or bytes outside the file.
//
// Sharded checkpoints: model.safetensors.index.json's "weight_map" names the file of each
// tensor; SafetensorsSet opens every shard it names and checks that each tensor it lists exists.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/ggml_type.h"
#include "util/mapped_file.h"
#include "util/status.h"

namespace kvserve {

struct SafetensorsTensor {
  std::string name;
  GgmlType type = GgmlType::kF32;  // F32, F16, BF16, I8 for U8 (raw bytes), I32, I64
  std::vector<int64_t> shape;      // row-major, as stored: shape.back() is contiguous
  uint64_t n_elements = 0;
  uint64_t n_bytes = 0;
  uint64_t offset = 0;            // data_offsets[0], from the start of the data section
  const uint8_t* data = nullptr;  // into the mapping (or the bytes given to Parse)
};

class SafetensorsFile {
 public:
  static constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

  static Result<SafetensorsFile> Open(const std::string& path);
  // Parses an in-memory image (tests, the fuzzer); `bytes` must outlive the result.
  static Result<SafetensorsFile> Parse(const uint8_t* bytes, uint64_t size,
                                       std::string source_name);

  const std::string& path() const { return source_name_; }
  // Sorted by data offset.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(std::string_view name) const;
  // Keeps the tensors' data alive (null for Parse).
  std::shared_ptr<const MappedFile> mapping() const { return mapping_; }

 private:
  std::shared_ptr<const MappedFile> mapping_;
  std::string source_name_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;
};

// The tensors of one checkpoint: a single model.safetensors, or the shards named by
// model.safetensors.index.json. Tensor names are unique across shards.
class SafetensorsSet {
 public:
  // `folder` holds model.safetensors or model.safetensors.index.json (index preferred).
  static Result<SafetensorsSet> OpenFolder(const std::string& folder);
  static Result<SafetensorsSet> FromFiles(std::vector<SafetensorsFile> files);

  const SafetensorsTensor* Find(std::string_view name) const;
  // Every tensor, shard by shard.
  std::vector<const SafetensorsTensor*> tensors() const;
  // Keeps every shard's mapping alive.
  std::shared_ptr<const void> keep_alive() const { return files_; }

 private:
  std::shared_ptr<const std::vector<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsTensor*, std::less<>> index_;
};

}  // namespace kvserve
