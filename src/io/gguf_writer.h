// Builds a GGUF (version 3) file: metadata first, then tensor infos, then the aligned tensor data.
// Used by `kvserve convert`, `kvserve synth` and by tests that craft good and bad files.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

// Receives consecutive pieces of a file or tensor being written; an error aborts the write.
using ByteSink = std::function<Status(const uint8_t* data, size_t size)>;
// Produces one tensor's bytes, in order, into `sink`. Called each time the file is written, so
// a converter can stream a tensor from its source without holding the whole output in memory.
using TensorProducer = std::function<Status(const ByteSink& sink)>;

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
  void SetUint8Array(const std::string& key, const std::vector<uint8_t>& values);
  void SetBoolArray(const std::string& key, const std::vector<bool>& values);
  // Copies one metadata entry (any type, arrays included) from a file being read.
  void CopyValue(const std::string& key, const GgufValue& value);

  // dims in GGML order (dims[0] innermost); `data` must hold exactly the tensor's bytes.
  void AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                 std::vector<uint8_t> data);
  // A streamed tensor: `produce` must emit exactly the bytes that `type` and `dims` call for
  // (the writer checks the count and fails the write otherwise).
  void AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                 TensorProducer produce);

  // The whole file in memory. Empty when a streamed tensor's producer fails (use WriteTo or
  // WriteFile to see why).
  std::vector<uint8_t> Serialize() const;
  // Emits the file front to back into `sink`; memory use is the header plus whatever the
  // producers hold, not the tensor data.
  Status WriteTo(const ByteSink& sink) const;
  // Writes `path` through a temporary file beside it and renames it into place, so a failed
  // write never leaves a truncated file under the final name (and `path` may be the input).
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
    uint64_t n_bytes;           // in the file, without padding
    std::vector<uint8_t> data;  // when `produce` is empty
    TensorProducer produce;
  };
  void Set(const std::string& key, std::vector<uint8_t> encoded);

  uint64_t alignment_;
  std::vector<Entry> entries_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvserve
