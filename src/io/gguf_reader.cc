#include "io/gguf_reader.h"

#include <cstring>
#include <limits>

#include "util/checked_math.h"

namespace kvserve {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kMaxDims = 4;
constexpr uint64_t kMaxAlignment = 1u << 20;

bool IsKnownValueType(uint32_t type) { return type <= 12; }

bool IsIntegerType(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
      return true;
    default:
      return false;
  }
}

bool IsSignedType(GgufValueType type) {
  return type == GgufValueType::kInt8 || type == GgufValueType::kInt16 ||
         type == GgufValueType::kInt32 || type == GgufValueType::kInt64;
}

template <typename T>
T LoadLe(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

// Decodes one scalar element (the caller has checked that GgufScalarBytes(type) bytes are present).
void DecodeScalar(GgufValueType type, const uint8_t* p, GgufValue* out) {
  switch (type) {
    case GgufValueType::kUint8:
      out->u = p[0];
      break;
    case GgufValueType::kBool:
      out->u = p[0];
      break;
    case GgufValueType::kInt8:
      out->i = static_cast<int8_t>(p[0]);
      break;
    case GgufValueType::kUint16:
      out->u = LoadLe<uint16_t>(p);
      break;
    case GgufValueType::kInt16:
      out->i = LoadLe<int16_t>(p);
      break;
    case GgufValueType::kUint32:
      out->u = LoadLe<uint32_t>(p);
      break;
    case GgufValueType::kInt32:
      out->i = LoadLe<int32_t>(p);
      break;
    case GgufValueType::kUint64:
      out->u = LoadLe<uint64_t>(p);
      break;
    case GgufValueType::kInt64:
      out->i = LoadLe<int64_t>(p);
      break;
    case GgufValueType::kFloat32:
      out->f = LoadLe<float>(p);
      break;
    case GgufValueType::kFloat64:
      out->f = LoadLe<double>(p);
      break;
    default:
      break;
  }
  if (IsSignedType(type)) out->u = static_cast<uint64_t>(out->i);
}

}  // namespace

const char* GgufValueTypeName(GgufValueType type) {
  static const char* const kNames[] = {"uint8",  "int8",    "uint16", "int16",  "uint32",
                                       "int32",  "float32", "bool",   "string", "array",
                                       "uint64", "int64",   "float64"};
  const auto index = static_cast<uint32_t>(type);
  return index < 13 ? kNames[index] : "unknown";
}

uint64_t GgufScalarBytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

std::string TensorInfo::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Walks the file front to back. Each Read* checks the bytes are there before touching them.
class GgufParser {
 public:
  GgufParser(const uint8_t* bytes, uint64_t size, GgufFile* file)
      : bytes_(bytes), size_(size), file_(file) {}

  Status Parse() {
    uint32_t magic = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU32("magic", &magic));
    if (magic != kGgufMagic) return Error("bad magic " + Hex(magic) + " (expected \"GGUF\")");
    KVSERVE_RETURN_IF_ERROR(ReadU32("version", &file_->version_));
    if (file_->version_ != 2 && file_->version_ != 3) {
      return Error("unsupported GGUF version " + std::to_string(file_->version_) +
                   " (supported: 2, 3)");
    }
    uint64_t n_tensors = 0, n_metadata = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU64("tensor count", &n_tensors));
    KVSERVE_RETURN_IF_ERROR(ReadU64("metadata count", &n_metadata));
    // Each metadata entry takes at least 13 bytes (key length, type, 1-byte value); each tensor
    // info at least 24 + 8 bytes. Counts beyond that cannot be real: refuse before looping.
    if (n_metadata > Remaining() / 13) {
      return Error("metadata count " + std::to_string(n_metadata) +
                   " exceeds what the file can hold");
    }
    for (uint64_t i = 0; i < n_metadata; ++i) KVSERVE_RETURN_IF_ERROR(ParseKeyValue(i));
    KVSERVE_RETURN_IF_ERROR(ReadAlignment());
    if (n_tensors > Remaining() / 32) {
      return Error("tensor count " + std::to_string(n_tensors) + " exceeds what the file can hold");
    }
    file_->tensors_.reserve(n_tensors);
    for (uint64_t i = 0; i < n_tensors; ++i) KVSERVE_RETURN_IF_ERROR(ParseTensorInfo(i));
    auto data_offset = CheckedAlignUp(pos_, file_->alignment_);
    if (!data_offset) return Error("data section offset overflows");
    file_->data_offset_ = *data_offset;
    for (TensorInfo& tensor : file_->tensors_) KVSERVE_RETURN_IF_ERROR(PlaceTensor(tensor));
    return Status::Ok();
  }

 private:
  Status Error(const std::string& what) const {
    return Status::InvalidArgument(file_->source_name_ + ": " + what);
  }
  static std::string Hex(uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "0x%08x", v);
    return buf;
  }
  uint64_t Remaining() const { return size_ - pos_; }

  Status Need(uint64_t n, const std::string& what) const {
    if (n > Remaining()) {
      return Error("truncated file: " + what + " needs " + std::to_string(n) + " bytes at offset " +
                   std::to_string(pos_) + " but only " + std::to_string(Remaining()) + " remain");
    }
    return Status::Ok();
  }
  Status ReadU32(const std::string& what, uint32_t* out) {
    KVSERVE_RETURN_IF_ERROR(Need(4, what));
    *out = LoadLe<uint32_t>(bytes_ + pos_);
    pos_ += 4;
    return Status::Ok();
  }
  Status ReadU64(const std::string& what, uint64_t* out) {
    KVSERVE_RETURN_IF_ERROR(Need(8, what));
    *out = LoadLe<uint64_t>(bytes_ + pos_);
    pos_ += 8;
    return Status::Ok();
  }
  Status ReadString(const std::string& what, std::string_view* out) {
    uint64_t length = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU64(what + " length", &length));
    if (length > Remaining()) {
      return Error(what + " length " + std::to_string(length) + " exceeds the " +
                   std::to_string(Remaining()) + " bytes left in the file");
    }
    *out = std::string_view(reinterpret_cast<const char*>(bytes_ + pos_), length);
    pos_ += length;
    return Status::Ok();
  }

  Status ParseKeyValue(uint64_t index) {
    std::string_view key;
    KVSERVE_RETURN_IF_ERROR(ReadString("metadata key #" + std::to_string(index), &key));
    const std::string name(key);
    uint32_t type_id = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU32("type of metadata key '" + name + "'", &type_id));
    if (!IsKnownValueType(type_id)) {
      return Error("metadata key '" + name + "' has unknown value type " + std::to_string(type_id));
    }
    GgufValue value;
    value.type = static_cast<GgufValueType>(type_id);
    KVSERVE_RETURN_IF_ERROR(ParseValue("metadata key '" + name + "'", &value));
    if (!file_->metadata_.emplace(name, value).second) {
      return Error("duplicate metadata key '" + name + "'");
    }
    return Status::Ok();
  }

  Status ParseValue(const std::string& what, GgufValue* value) {
    if (value->type == GgufValueType::kString) return ReadString(what, &value->str);
    if (value->type != GgufValueType::kArray) {
      const uint64_t n = GgufScalarBytes(value->type);
      KVSERVE_RETURN_IF_ERROR(Need(n, what));
      DecodeScalar(value->type, bytes_ + pos_, value);
      pos_ += n;
      return Status::Ok();
    }
    uint32_t element_type = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU32(what + " array type", &element_type));
    if (!IsKnownValueType(element_type) ||
        static_cast<GgufValueType>(element_type) == GgufValueType::kArray) {
      return Error(what + " has unsupported array element type " + std::to_string(element_type));
    }
    value->array_type = static_cast<GgufValueType>(element_type);
    KVSERVE_RETURN_IF_ERROR(ReadU64(what + " array size", &value->array_size));
    value->array_data = bytes_ + pos_;
    if (value->array_type == GgufValueType::kString) {
      if (value->array_size > Remaining() / 8) {
        return Error(what + " array size " + std::to_string(value->array_size) +
                     " exceeds what the file can hold");
      }
      for (uint64_t i = 0; i < value->array_size; ++i) {
        std::string_view ignored;
        KVSERVE_RETURN_IF_ERROR(ReadString(what + " element " + std::to_string(i), &ignored));
      }
      return Status::Ok();
    }
    auto n_bytes = CheckedMul(value->array_size, GgufScalarBytes(value->array_type));
    if (!n_bytes || *n_bytes > Remaining()) {
      return Error(what + " array size " + std::to_string(value->array_size) +
                   " exceeds what the file can hold");
    }
    pos_ += *n_bytes;
    return Status::Ok();
  }

  Status ReadAlignment() {
    const GgufValue* value = file_->Find("general.alignment");
    if (value == nullptr) return Status::Ok();
    if (!IsIntegerType(value->type)) {
      return Error(std::string("metadata key 'general.alignment' has type ") +
                   GgufValueTypeName(value->type) + ", expected an integer");
    }
    const uint64_t alignment = value->u;
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > kMaxAlignment) {
      return Error("metadata key 'general.alignment' = " + std::to_string(alignment) +
                   " is not a power of two up to " + std::to_string(kMaxAlignment));
    }
    file_->alignment_ = alignment;
    return Status::Ok();
  }

  Status ParseTensorInfo(uint64_t index) {
    TensorInfo tensor;
    std::string_view name;
    KVSERVE_RETURN_IF_ERROR(ReadString("name of tensor #" + std::to_string(index), &name));
    tensor.name = std::string(name);
    const std::string what = "tensor '" + tensor.name + "'";
    uint32_t n_dims = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU32(what + " dimension count", &n_dims));
    if (n_dims == 0 || n_dims > kMaxDims) {
      return Error(what + " has " + std::to_string(n_dims) + " dimensions (expected 1 to 4)");
    }
    uint64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      KVSERVE_RETURN_IF_ERROR(ReadU64(what + " dimension", &dim));
      if (dim == 0 || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(what + " dimension " + std::to_string(d) + " = " + std::to_string(dim) +
                     " is out of range");
      }
      auto product = CheckedMul(n_elements, dim);
      if (!product || *product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error(what + " dimensions " + std::to_string(n_elements) + " x " +
                     std::to_string(dim) + " overflow");
      }
      n_elements = *product;
      tensor.dims.push_back(static_cast<int64_t>(dim));
    }
    uint32_t type_id = 0;
    KVSERVE_RETURN_IF_ERROR(ReadU32(what + " type", &type_id));
    auto traits = GetGgmlTypeTraits(type_id);
    if (!traits) return Error(what + " has unknown tensor type " + std::to_string(type_id));
    tensor.type = static_cast<GgmlType>(type_id);
    if (tensor.dims[0] % traits->block_elements != 0) {
      return Error(what + " row length " + std::to_string(tensor.dims[0]) +
                   " is not a multiple of the " + traits->name + " block size " +
                   std::to_string(traits->block_elements));
    }
    tensor.n_elements = n_elements;
    // n_elements < 2^63 but block_bytes can be 8 or more: the byte size can overflow uint64.
    auto n_bytes = CheckedMul(n_elements / traits->block_elements, traits->block_bytes);
    if (!n_bytes) {
      return Error(what + " size of " + std::to_string(n_elements) + " " + traits->name +
                   " elements overflows");
    }
    tensor.n_bytes = *n_bytes;
    KVSERVE_RETURN_IF_ERROR(ReadU64(what + " offset", &tensor.offset));
    if (file_->tensor_index_.count(tensor.name) != 0) {
      return Error("duplicate tensor name '" + tensor.name + "'");
    }
    file_->tensor_index_.emplace(tensor.name, file_->tensors_.size());
    file_->tensors_.push_back(std::move(tensor));
    return Status::Ok();
  }

  Status PlaceTensor(TensorInfo& tensor) {
    const std::string what = "tensor '" + tensor.name + "'";
    if (tensor.offset % file_->alignment_ != 0) {
      return Error(what + " offset " + std::to_string(tensor.offset) +
                   " is not a multiple of the alignment " + std::to_string(file_->alignment_));
    }
    auto begin = CheckedAdd(file_->data_offset_, tensor.offset);
    auto end = begin ? CheckedAdd(*begin, tensor.n_bytes) : std::nullopt;
    if (!end || *end > size_) {
      return Error(what + ": data offset " + std::to_string(tensor.offset) + " + size " +
                   std::to_string(tensor.n_bytes) + " exceeds the data section (file size " +
                   std::to_string(size_) + ", data starts at " +
                   std::to_string(file_->data_offset_) + ")");
    }
    tensor.data = bytes_ + *begin;
    return Status::Ok();
  }

  const uint8_t* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
  GgufFile* file_;
};

Result<GgufFile> GgufFile::Parse(const uint8_t* bytes, uint64_t size, std::string source_name) {
  GgufFile file;
  file.bytes_ = bytes;
  file.size_ = size;
  file.source_name_ = std::move(source_name);
  GgufParser parser(bytes, size, &file);
  Status status = parser.Parse();
  if (!status.ok()) return status;
  return file;
}

Result<GgufFile> GgufFile::Open(const std::string& path) {
  auto mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  auto shared = std::make_shared<MappedFile>(std::move(mapping).value());
  auto file = Parse(shared->data(), shared->size(), path);
  if (!file.ok()) return file.status();
  file->mapping_ = std::move(shared);
  return file;
}

Result<GgufFile> GgufFile::FromParts(std::vector<uint8_t> metadata_image,
                                     std::vector<TensorInfo> tensors,
                                     std::shared_ptr<const void> keep_alive,
                                     std::string source_name) {
  auto image = std::make_shared<const std::vector<uint8_t>>(std::move(metadata_image));
  auto parsed = Parse(image->data(), image->size(), source_name);
  if (!parsed.ok()) return parsed.status();
  GgufFile file = std::move(parsed).value();
  if (!file.tensors_.empty()) {
    return Status::InvalidArgument(source_name + ": the metadata image holds " +
                                   std::to_string(file.tensors_.size()) +
                                   " tensors (expected none)");
  }
  uint64_t offset = 0;
  for (TensorInfo& tensor : tensors) {
    const std::string what = source_name + ": tensor '" + tensor.name + "'";
    if (tensor.dims.empty() || tensor.dims.size() > kMaxDims) {
      return Status::InvalidArgument(what + " has " + std::to_string(tensor.dims.size()) +
                                     " dimensions (expected 1 to 4)");
    }
    const GgmlTypeTraits traits = TraitsOf(tensor.type);
    uint64_t n_elements = 1;
    for (int64_t dim : tensor.dims) {
      auto product = dim > 0 ? CheckedMul(n_elements, static_cast<uint64_t>(dim)) : std::nullopt;
      if (!product || *product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::InvalidArgument(what + " has bad shape " + tensor.ShapeString());
      }
      n_elements = *product;
    }
    auto n_bytes = tensor.dims[0] % traits.block_elements == 0
                       ? CheckedMul(n_elements / traits.block_elements, traits.block_bytes)
                       : std::nullopt;
    if (!n_bytes) {
      return Status::InvalidArgument(what + " shape " + tensor.ShapeString() +
                                     " does not fit type " + traits.name);
    }
    if (tensor.data == nullptr) return Status::InvalidArgument(what + " has no data");
    if (file.tensor_index_.count(tensor.name) != 0) {
      return Status::InvalidArgument(source_name + ": duplicate tensor name '" + tensor.name + "'");
    }
    tensor.n_elements = n_elements;
    tensor.n_bytes = *n_bytes;
    tensor.offset = offset;  // as if laid out back to back; informational only
    offset = CheckedAlignUp(CheckedAdd(offset, *n_bytes).value_or(0), file.alignment_).value_or(0);
    file.tensor_index_.emplace(tensor.name, file.tensors_.size());
    file.tensors_.push_back(std::move(tensor));
  }
  file.keep_alive_ =
      std::make_shared<std::pair<std::shared_ptr<const void>, std::shared_ptr<const void>>>(
          image, keep_alive);
  return file;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const GgufValue*> GgufFile::Require(std::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) {
    return Result<const GgufValue*>::InvalidArgument(
        source_name_ + ": missing required metadata key '" + std::string(key) + "'");
  }
  return value;
}

namespace {
Status WrongType(const std::string& source, std::string_view key, GgufValueType actual,
                 const char* expected) {
  return Status::InvalidArgument(source + ": metadata key '" + std::string(key) + "' has type " +
                                 GgufValueTypeName(actual) + ", expected " + expected);
}
}  // namespace

Result<uint64_t> GgufFile::GetUint(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (!IsIntegerType(v.type)) return WrongType(source_name_, key, v.type, "an unsigned integer");
  if (IsSignedType(v.type) && v.i < 0) {
    return Status::InvalidArgument(source_name_ + ": metadata key '" + std::string(key) +
                                   "' = " + std::to_string(v.i) + " must not be negative");
  }
  return v.u;
}

Result<int64_t> GgufFile::GetInt(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (!IsIntegerType(v.type)) return WrongType(source_name_, key, v.type, "an integer");
  if (IsSignedType(v.type)) return v.i;
  if (v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Status::InvalidArgument(source_name_ + ": metadata key '" + std::string(key) +
                                   "' = " + std::to_string(v.u) + " is out of range");
  }
  return static_cast<int64_t>(v.u);
}

Result<double> GgufFile::GetFloat(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (v.type != GgufValueType::kFloat32 && v.type != GgufValueType::kFloat64) {
    return WrongType(source_name_, key, v.type, "float32");
  }
  return v.f;
}

Result<bool> GgufFile::GetBool(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  if ((*value)->type != GgufValueType::kBool) {
    return WrongType(source_name_, key, (*value)->type, "bool");
  }
  return (*value)->u != 0;
}

Result<std::string_view> GgufFile::GetString(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  if ((*value)->type != GgufValueType::kString) {
    return WrongType(source_name_, key, (*value)->type, "string");
  }
  return (*value)->str;
}

Result<std::vector<std::string_view>> GgufFile::GetStringArray(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (v.type != GgufValueType::kArray || v.array_type != GgufValueType::kString) {
    return WrongType(source_name_, key, v.type, "array of string");
  }
  std::vector<std::string_view> out;
  out.reserve(v.array_size);
  const uint8_t* p = v.array_data;
  for (uint64_t i = 0; i < v.array_size; ++i) {  // lengths were validated by the parser
    const uint64_t length = LoadLe<uint64_t>(p);
    out.emplace_back(reinterpret_cast<const char*>(p + 8), length);
    p += 8 + length;
  }
  return out;
}

Result<std::vector<float>> GgufFile::GetFloatArray(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (v.type != GgufValueType::kArray ||
      (v.array_type != GgufValueType::kFloat32 && v.array_type != GgufValueType::kFloat64)) {
    return WrongType(source_name_, key, v.type, "array of float32");
  }
  std::vector<float> out(v.array_size);
  const uint64_t stride = GgufScalarBytes(v.array_type);
  for (uint64_t i = 0; i < v.array_size; ++i) {
    GgufValue element;
    DecodeScalar(v.array_type, v.array_data + i * stride, &element);
    out[i] = static_cast<float>(element.f);
  }
  return out;
}

Result<std::vector<int64_t>> GgufFile::GetIntArray(std::string_view key) const {
  auto value = Require(key);
  if (!value.ok()) return value.status();
  const GgufValue& v = **value;
  if (v.type != GgufValueType::kArray || !IsIntegerType(v.array_type)) {
    return WrongType(source_name_, key, v.type, "array of integers");
  }
  std::vector<int64_t> out(v.array_size);
  const uint64_t stride = GgufScalarBytes(v.array_type);
  for (uint64_t i = 0; i < v.array_size; ++i) {
    GgufValue element;
    DecodeScalar(v.array_type, v.array_data + i * stride, &element);
    out[i] = IsSignedType(v.array_type) ? element.i : static_cast<int64_t>(element.u);
  }
  return out;
}

Result<uint64_t> GgufFile::GetUintOr(std::string_view key, uint64_t fallback) const {
  return Find(key) ? GetUint(key) : Result<uint64_t>(fallback);
}

Result<double> GgufFile::GetFloatOr(std::string_view key, double fallback) const {
  return Find(key) ? GetFloat(key) : Result<double>(fallback);
}

Result<bool> GgufFile::GetBoolOr(std::string_view key, bool fallback) const {
  return Find(key) ? GetBool(key) : Result<bool>(fallback);
}

void GgufFile::ReleasePages(const uint8_t* p, size_t bytes) const {
  if (mapping_ != nullptr) mapping_->ReleasePages(p, bytes);
}

}  // namespace kvserve
