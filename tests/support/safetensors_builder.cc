#include "support/safetensors_builder.h"

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

namespace kvserve::testing {

void SafetensorsBuilder::Add(const std::string& name, const std::string& dtype,
                             const std::vector<int64_t>& shape, std::vector<uint8_t> data) {
  tensors_.push_back({name, dtype, shape, std::move(data)});
}

void SafetensorsBuilder::AddF32(const std::string& name, const std::vector<int64_t>& shape,
                                const std::vector<float>& values) {
  std::vector<uint8_t> data(values.size() * 4);
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  Add(name, "F32", shape, std::move(data));
}

std::vector<uint8_t> SafetensorsBuilder::Build() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  for (const Tensor& t : tensors_) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text += ' ';
  return Raw(text, data);
}

std::vector<uint8_t> SafetensorsBuilder::Raw(const std::string& header,
                                             const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes(8);
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(length >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

bool SafetensorsBuilder::WriteFile(const std::string& path) const {
  return WriteBytes(path, Build());
}

std::vector<std::string> SafetensorsBuilder::names() const {
  std::vector<std::string> out;
  for (const Tensor& t : tensors_) out.push_back(t.name);
  return out;
}

bool WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

bool WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

}  // namespace kvserve::testing
