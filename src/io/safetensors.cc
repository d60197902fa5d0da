#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/checked_math.h"

namespace kvserve {

namespace {

using nlohmann::json;

constexpr uint64_t kLengthBytes = 8;

// Element type and size for a safetensors dtype name; false for any dtype kvserve cannot use.
bool DtypeFor(const std::string& name, GgmlType* type, uint64_t* size) {
  if (name == "F32") {
    *type = GgmlType::kF32;
    *size = 4;
  } else if (name == "F16") {
    *type = GgmlType::kF16;
    *size = 2;
  } else if (name == "BF16") {
    *type = GgmlType::kBF16;
    *size = 2;
  } else if (name == "U8") {  // raw bytes (gpt-oss's MXFP4 blocks and scales), typed I8
    *type = GgmlType::kI8;
    *size = 1;
  } else if (name == "I32" || name == "I64") {  // indices (a converter skips them; never weights)
    *type = name == "I32" ? GgmlType::kI32 : GgmlType::kI64;
    *size = name == "I32" ? 4 : 8;
  } else {
    return false;
  }
  return true;
}

// Reads a JSON number that must be a non-negative integer.
bool ReadUnsigned(const json& value, uint64_t* out) {
  if (value.is_number_unsigned()) {
    *out = value.get<uint64_t>();
    return true;
  }
  if (value.is_number_integer() && value.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(value.get<int64_t>());
    return true;
  }
  return false;
}

// Validates one header entry (all but the data pointer, which needs the sorted layout).
Status ParseEntry(const std::string& source, const std::string& name, const json& entry,
                  SafetensorsTensor* out) {
  const std::string what = source + ": tensor '" + name + "'";
  if (!entry.is_object()) return Status::InvalidArgument(what + ": header entry is not an object");
  out->name = name;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    return Status::InvalidArgument(what + ": missing string field 'dtype'");
  }
  uint64_t element_size = 0;
  if (!DtypeFor(dtype->get<std::string>(), &out->type, &element_size)) {
    return Status::InvalidArgument(what + ": dtype '" + dtype->get<std::string>() +
                                   "' is not supported (supported: F32, F16, BF16, U8, I32, I64)");
  }
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    return Status::InvalidArgument(what + ": missing array field 'shape'");
  }
  uint64_t n_elements = 1;
  for (const json& dim_json : *shape) {
    uint64_t dim = 0;
    if (!ReadUnsigned(dim_json, &dim) ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(what + ": shape entry " + dim_json.dump() +
                                     " is not a non-negative integer");
    }
    auto product = CheckedMul(n_elements, dim);
    if (!product || *product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::InvalidArgument(what + ": shape " + shape->dump() + " overflows");
    }
    n_elements = *product;
    out->shape.push_back(static_cast<int64_t>(dim));
  }
  auto n_bytes = CheckedMul(n_elements, element_size);
  if (!n_bytes) {
    return Status::InvalidArgument(what + ": size of shape " + shape->dump() + " in " +
                                   dtype->get<std::string>() + " overflows");
  }
  out->n_elements = n_elements;
  out->n_bytes = *n_bytes;
  auto offsets = entry.find("data_offsets");
  uint64_t begin = 0, end = 0;
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !ReadUnsigned((*offsets)[0], &begin) || !ReadUnsigned((*offsets)[1], &end)) {
    return Status::InvalidArgument(
        what + ": 'data_offsets' must be [begin, end] with non-negative integers");
  }
  if (end < begin) {
    return Status::InvalidArgument(what + ": data_offsets [" + std::to_string(begin) + ", " +
                                   std::to_string(end) + "] are out of order");
  }
  if (end - begin != out->n_bytes) {
    return Status::InvalidArgument(
        what + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] hold " +
        std::to_string(end - begin) + " bytes but shape " + shape->dump() + " in " +
        dtype->get<std::string>() + " needs " + std::to_string(out->n_bytes));
  }
  out->offset = begin;
  return Status::Ok();
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Result<std::string>::InvalidArgument("cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Parse(const uint8_t* bytes, uint64_t size,
                                               std::string source_name) {
  SafetensorsFile file;
  file.source_name_ = std::move(source_name);
  const std::string& src = file.source_name_;
  if (size < kLengthBytes) {
    return Status::InvalidArgument(src + ": file of " + std::to_string(size) +
                                   " bytes is too short for the 8-byte header length");
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];
  if (header_bytes > kMaxHeaderBytes) {
    return Status::InvalidArgument(src + ": header length " + std::to_string(header_bytes) +
                                   " exceeds the limit of " + std::to_string(kMaxHeaderBytes) +
                                   " bytes");
  }
  if (header_bytes > size - kLengthBytes) {
    return Status::InvalidArgument(src + ": header length " + std::to_string(header_bytes) +
                                   " exceeds the " + std::to_string(size - kLengthBytes) +
                                   " bytes after the length field");
  }
  json header;
  try {
    header = json::parse(bytes + kLengthBytes, bytes + kLengthBytes + header_bytes);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(src + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return Status::InvalidArgument(src + ": header is not a JSON object");

  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    SafetensorsTensor tensor;
    KVSERVE_RETURN_IF_ERROR(ParseEntry(src, name, entry, &tensor));
    file.tensors_.push_back(std::move(tensor));
  }
  // Ties (several empty tensors at one offset) keep the header order: stable and deterministic.
  std::stable_sort(
      file.tensors_.begin(), file.tensors_.end(),
      [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.offset < b.offset; });
  const uint64_t data_start = kLengthBytes + header_bytes;
  const uint64_t data_bytes = size - data_start;
  uint64_t expected = 0;  // where the next tensor must begin
  const SafetensorsTensor* previous = nullptr;
  for (SafetensorsTensor& tensor : file.tensors_) {
    const std::string what = src + ": tensor '" + tensor.name + "'";
    const std::string range = "[" + std::to_string(tensor.offset) + ", " +
                              std::to_string(tensor.offset + tensor.n_bytes) + ")";
    if (tensor.offset < expected) {
      return Status::InvalidArgument(what + " data " + range + " overlaps tensor '" +
                                     previous->name + "', which ends at " +
                                     std::to_string(expected));
    }
    if (tensor.offset > expected) {
      return Status::InvalidArgument(what + " data " + range +
                                     " leaves a gap: the previous tensor" +
                                     (previous ? " '" + previous->name + "'" : std::string()) +
                                     " ends at " + std::to_string(expected));
    }
    if (tensor.n_bytes > data_bytes - tensor.offset) {
      return Status::InvalidArgument(
          what + " data " + range + " extends past the data section of " +
          std::to_string(data_bytes) + " bytes (file size " + std::to_string(size) + ")");
    }
    tensor.data = bytes + data_start + tensor.offset;
    expected = tensor.offset + tensor.n_bytes;
    previous = &tensor;
  }
  if (expected != data_bytes) {
    return Status::InvalidArgument(src + ": tensors cover " + std::to_string(expected) +
                                   " bytes of a data section of " + std::to_string(data_bytes) +
                                   " (trailing bytes)");
  }
  for (size_t i = 0; i < file.tensors_.size(); ++i) {
    if (!file.index_.emplace(file.tensors_[i].name, i).second) {
      return Status::InvalidArgument(src + ": duplicate tensor name '" + file.tensors_[i].name +
                                     "'");
    }
  }
  return file;
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  auto shared = std::make_shared<const MappedFile>(std::move(mapping).value());
  auto file = Parse(shared->data(), shared->size(), path);
  if (!file.ok()) return file.status();
  file->mapping_ = std::move(shared);
  return file;
}

const SafetensorsTensor* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

Result<SafetensorsSet> SafetensorsSet::FromFiles(std::vector<SafetensorsFile> files) {
  SafetensorsSet set;
  set.files_ = std::make_shared<const std::vector<SafetensorsFile>>(std::move(files));
  for (const SafetensorsFile& file : *set.files_) {
    for (const SafetensorsTensor& tensor : file.tensors()) {
      if (!set.index_.emplace(tensor.name, &tensor).second) {
        return Status::InvalidArgument(file.path() + ": tensor '" + tensor.name +
                                       "' also appears in another shard");
      }
    }
  }
  return set;
}

Result<SafetensorsSet> SafetensorsSet::OpenFolder(const std::string& folder) {
  const std::string index_path = folder + "/model.safetensors.index.json";
  auto index_text = ReadTextFile(index_path);
  if (!index_text.ok()) {
    auto single = SafetensorsFile::Open(folder + "/model.safetensors");
    if (!single.ok()) {
      return Status::InvalidArgument(folder +
                                     ": neither model.safetensors.index.json nor a readable " +
                                     "model.safetensors (" + single.message() + ")");
    }
    std::vector<SafetensorsFile> files;
    files.push_back(std::move(single).value());
    return FromFiles(std::move(files));
  }
  json index;
  try {
    index = json::parse(*index_text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(index_path + ": not valid JSON: " + e.what());
  }
  auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || weight_map == index.end() || !weight_map->is_object()) {
    return Status::InvalidArgument(index_path + ": missing object 'weight_map'");
  }
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : weight_map->items()) {
    if (!shard.is_string()) {
      return Status::InvalidArgument(index_path + ": weight_map['" + tensor + "'] is not a string");
    }
    const std::string name = shard.get<std::string>();
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      return Status::InvalidArgument(index_path + ": weight_map['" + tensor + "'] = '" + name +
                                     "' is not a file name in the folder");
    }
    shard_names.insert(name);
  }
  std::vector<SafetensorsFile> files;
  for (const std::string& name : shard_names) {
    auto shard = SafetensorsFile::Open(folder + "/" + name);
    if (!shard.ok()) return shard.status();
    files.push_back(std::move(shard).value());
  }
  auto set = FromFiles(std::move(files));
  if (!set.ok()) return set.status();
  for (const auto& [tensor, shard] : weight_map->items()) {
    const SafetensorsTensor* found = set->Find(tensor);
    const std::string expected_path = folder + "/" + shard.get<std::string>();
    if (found == nullptr) {
      return Status::InvalidArgument(index_path + ": tensor '" + tensor + "' is not in " +
                                     expected_path);
    }
  }
  return set;
}

const SafetensorsTensor* SafetensorsSet::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

std::vector<const SafetensorsTensor*> SafetensorsSet::tensors() const {
  std::vector<const SafetensorsTensor*> out;
  if (!files_) return out;
  for (const SafetensorsFile& file : *files_) {
    for (const SafetensorsTensor& tensor : file.tensors()) out.push_back(&tensor);
  }
  return out;
}

}  // namespace kvserve
