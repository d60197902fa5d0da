// Writes safetensors images for tests: tensors laid out back to back in the order added, header
// padded with spaces to a multiple of 8 bytes (as the Hugging Face writer does).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvserve::testing {

class SafetensorsBuilder {
 public:
  // `dtype` "F32", "F16" or "BF16"; `shape` row-major; `data` exactly the tensor's bytes.
  void Add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
           std::vector<uint8_t> data);
  void AddF32(const std::string& name, const std::vector<int64_t>& shape,
              const std::vector<float>& values);
  std::vector<uint8_t> Build() const;
  // False when the file cannot be written.
  bool WriteFile(const std::string& path) const;
  // Names of the tensors added so far.
  std::vector<std::string> names() const;

  // An image from a raw header text and data section (for broken-header tests).
  static std::vector<uint8_t> Raw(const std::string& header, const std::vector<uint8_t>& data);

 private:
  struct Tensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::vector<Tensor> tensors_;
};

bool WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);
bool WriteText(const std::string& path, const std::string& text);

}  // namespace kvserve::testing
