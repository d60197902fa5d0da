#include "io/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kvserve {

namespace {

template <typename T>
void Append(std::vector<uint8_t>& out, T value) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

void AppendString(std::vector<uint8_t>& out, std::string_view s) {
  Append<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <typename T>
std::vector<uint8_t> Scalar(GgufValueType type, T value) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(type));
  Append<T>(out, value);
  return out;
}

}  // namespace

void GgufWriter::Set(const std::string& key, std::vector<uint8_t> encoded) {
  for (Entry& entry : entries_) {
    if (entry.key == key) {
      entry.encoded = std::move(encoded);
      return;
    }
  }
  entries_.push_back({key, std::move(encoded)});
}

void GgufWriter::SetUint32(const std::string& key, uint32_t v) {
  Set(key, Scalar(GgufValueType::kUint32, v));
}
void GgufWriter::SetInt32(const std::string& key, int32_t v) {
  Set(key, Scalar(GgufValueType::kInt32, v));
}
void GgufWriter::SetUint64(const std::string& key, uint64_t v) {
  Set(key, Scalar(GgufValueType::kUint64, v));
}
void GgufWriter::SetFloat32(const std::string& key, float v) {
  Set(key, Scalar(GgufValueType::kFloat32, v));
}
void GgufWriter::SetBool(const std::string& key, bool v) {
  Set(key, Scalar(GgufValueType::kBool, static_cast<uint8_t>(v)));
}

void GgufWriter::SetString(const std::string& key, const std::string& value) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kString));
  AppendString(out, value);
  Set(key, std::move(out));
}

void GgufWriter::SetStringArray(const std::string& key, const std::vector<std::string>& values) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kString));
  Append<uint64_t>(out, values.size());
  for (const std::string& value : values) AppendString(out, value);
  Set(key, std::move(out));
}

void GgufWriter::SetFloat32Array(const std::string& key, const std::vector<float>& values) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kFloat32));
  Append<uint64_t>(out, values.size());
  for (float value : values) Append<float>(out, value);
  Set(key, std::move(out));
}

void GgufWriter::SetInt32Array(const std::string& key, const std::vector<int32_t>& values) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kInt32));
  Append<uint64_t>(out, values.size());
  for (int32_t value : values) Append<int32_t>(out, value);
  Set(key, std::move(out));
}

void GgufWriter::SetUint8Array(const std::string& key, const std::vector<uint8_t>& values) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kUint8));
  Append<uint64_t>(out, values.size());
  out.insert(out.end(), values.begin(), values.end());
  Set(key, std::move(out));
}

void GgufWriter::SetBoolArray(const std::string& key, const std::vector<bool>& values) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kArray));
  Append<uint32_t>(out, static_cast<uint32_t>(GgufValueType::kBool));
  Append<uint64_t>(out, values.size());
  for (bool value : values) Append<uint8_t>(out, value ? 1 : 0);
  Set(key, std::move(out));
}

void GgufWriter::CopyValue(const std::string& key, const GgufValue& value) {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, static_cast<uint32_t>(value.type));
  switch (value.type) {
    case GgufValueType::kString:
      AppendString(out, value.str);
      break;
    case GgufValueType::kArray: {
      Append<uint32_t>(out, static_cast<uint32_t>(value.array_type));
      Append<uint64_t>(out, value.array_size);
      uint64_t n_bytes = 0;
      if (value.array_type == GgufValueType::kString) {
        const uint8_t* p = value.array_data;
        for (uint64_t i = 0; i < value.array_size; ++i) {
          uint64_t length;
          std::memcpy(&length, p + n_bytes, 8);
          n_bytes += 8 + length;
        }
      } else {
        n_bytes = value.array_size * GgufScalarBytes(value.array_type);
      }
      out.insert(out.end(), value.array_data, value.array_data + n_bytes);
      break;
    }
    case GgufValueType::kFloat32:
      Append<float>(out, static_cast<float>(value.f));
      break;
    case GgufValueType::kFloat64:
      Append<double>(out, value.f);
      break;
    default: {
      const uint64_t raw = value.u;  // integers and bool: low bytes, little-endian
      const size_t at = out.size();
      out.resize(at + GgufScalarBytes(value.type));
      std::memcpy(out.data() + at, &raw, GgufScalarBytes(value.type));
    }
  }
  Set(key, std::move(out));
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                           std::vector<uint8_t> data) {
  const uint64_t n_bytes = data.size();
  tensors_.push_back({name, type, dims, n_bytes, std::move(data), nullptr});
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type, const std::vector<int64_t>& dims,
                           TensorProducer produce) {
  const GgmlTypeTraits traits = TraitsOf(type);
  uint64_t n_elements = 1;
  for (int64_t dim : dims) n_elements *= static_cast<uint64_t>(dim);
  const uint64_t n_bytes = n_elements / traits.block_elements * traits.block_bytes;
  tensors_.push_back({name, type, dims, n_bytes, {}, std::move(produce)});
}

Status GgufWriter::WriteTo(const ByteSink& sink) const {
  std::vector<uint8_t> out;
  Append<uint32_t>(out, 0x46554747);
  Append<uint32_t>(out, 3);
  Append<uint64_t>(out, tensors_.size());
  const bool has_alignment_key = [&] {
    for (const Entry& e : entries_) {
      if (e.key == "general.alignment") return true;
    }
    return false;
  }();
  Append<uint64_t>(out, entries_.size() + (alignment_ != 32 && !has_alignment_key ? 1 : 0));
  for (const Entry& entry : entries_) {
    AppendString(out, entry.key);
    out.insert(out.end(), entry.encoded.begin(), entry.encoded.end());
  }
  if (alignment_ != 32 && !has_alignment_key) {
    AppendString(out, "general.alignment");
    auto encoded = Scalar(GgufValueType::kUint32, static_cast<uint32_t>(alignment_));
    out.insert(out.end(), encoded.begin(), encoded.end());
  }
  uint64_t offset = 0;
  for (const Tensor& tensor : tensors_) {
    AppendString(out, tensor.name);
    Append<uint32_t>(out, static_cast<uint32_t>(tensor.dims.size()));
    for (int64_t dim : tensor.dims) Append<uint64_t>(out, static_cast<uint64_t>(dim));
    Append<uint32_t>(out, static_cast<uint32_t>(tensor.type));
    Append<uint64_t>(out, offset);
    offset += (tensor.n_bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  out.resize((out.size() + alignment_ - 1) / alignment_ * alignment_, 0);
  KVSERVE_RETURN_IF_ERROR(sink(out.data(), out.size()));

  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const Tensor& tensor : tensors_) {
    if (!tensor.produce) {
      KVSERVE_RETURN_IF_ERROR(sink(tensor.data.data(), tensor.data.size()));
    } else {
      uint64_t written = 0;
      const ByteSink counting = [&](const uint8_t* data, size_t size) {
        written += size;
        if (written > tensor.n_bytes) return Status::Ok();  // reported below, once
        return sink(data, size);
      };
      KVSERVE_RETURN_IF_ERROR(tensor.produce(counting));
      if (written != tensor.n_bytes) {
        return Status::InvalidArgument("tensor '" + tensor.name + "': producer wrote " +
                                       std::to_string(written) + " bytes, expected " +
                                       std::to_string(tensor.n_bytes));
      }
    }
    const uint64_t padding = (alignment_ - tensor.n_bytes % alignment_) % alignment_;
    KVSERVE_RETURN_IF_ERROR(sink(zeros.data(), padding));
  }
  return Status::Ok();
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  const Status status = WriteTo([&](const uint8_t* data, size_t size) {
    out.insert(out.end(), data, data + size);
    return Status::Ok();
  });
  if (!status.ok()) return {};
  return out;
}

Status GgufWriter::WriteFile(const std::string& path) const {
  const std::string temp_path = path + ".tmp";
  std::FILE* file = std::fopen(temp_path.c_str(), "wb");
  if (file == nullptr) {
    return Status::InvalidArgument("cannot create '" + temp_path + "': " + std::strerror(errno));
  }
  Status status = WriteTo([&](const uint8_t* data, size_t size) {
    if (size != 0 && std::fwrite(data, 1, size, file) != size) {
      return Status::InvalidArgument("cannot write '" + temp_path + "': " + std::strerror(errno));
    }
    return Status::Ok();
  });
  if (std::fclose(file) != 0 && status.ok()) {
    status = Status::InvalidArgument("cannot write '" + temp_path + "': " + std::strerror(errno));
  }
  if (status.ok() && std::rename(temp_path.c_str(), path.c_str()) != 0) {
    status = Status::InvalidArgument("cannot rename '" + temp_path + "' to '" + path +
                                     "': " + std::strerror(errno));
  }
  if (!status.ok()) std::remove(temp_path.c_str());
  return status;
}

}  // namespace kvserve
