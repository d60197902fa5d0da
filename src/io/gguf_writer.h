// Builds a GGUF (version 3) file: metadata first, then tensor infos, then the aligned tensor data.
// Used by `kvserve convert`, `kvserve synth` and by tests that craft good and bad files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void SetUint32(const std::string& key, uint32_t value);
  void SetInt32(const std::string& key, int32_t value);
  void SetUint64(const std::string& key, uint64_t value);
  void SetFloat32(const std::string& key, float value);
  void SetBool(const std::string& key, bool value);
  void SetString(const std::string& key, const std::string& value);
  void SetStringArray(const std::string& key, const std::vector<std::string>& values);
  void SetFloat32Array(const std::string& key, const std::vector<float>& values);
  void SetInt32Array(const std::string& key, const std::vector<int32_t>& values);
  // Copies one metadata entry (any type, arrays included) from a file being read.
  void CopyValue(const std::string& key, const GgufValue& value);

  // dims in GGML order (dims[0] innermost); `data` must hold exactly the tensor's bytes.
  void AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                 std::vector<uint8_t> data);

  std::vector<uint8_t> Serialize() const;
  Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string key;
    std::vector<uint8_t> encoded;  // value type + value, as in the file
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  void Set(const std::string& key, std::vector<uint8_t> encoded);

  uint64_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvserve
