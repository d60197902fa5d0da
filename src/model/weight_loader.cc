#include "model/weight_loader.h"

#include "kernels/quantize.h"

namespace kvserve {

Status WeightLoader::Matrix(const std::string& name, int64_t n_out, int64_t n_in,
                            WeightMatrix* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->dims.size() != 2 || t->dims[0] != n_in || t->dims[1] != n_out) {
    return WrongShape(*t, "[" + std::to_string(n_in) + ", " + std::to_string(n_out) + "]");
  }
  if (!TraitsOf(t->type).supported) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has type " +
                                   GgmlTypeName(t->type) + ", which kvserve cannot compute with " +
                                   "(supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
  *out = WeightMatrix{.type = t->type,
                      .data = t->data,
                      .n_out = n_out,
                      .n_in = n_in,
                      .row_bytes = RowBytes(t->type, n_in)};
  return Status::Ok();
}

Status WeightLoader::RowMatrix(const std::string& name, int64_t n_in, WeightMatrix* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  const bool row = t->dims.size() == 1 || (t->dims.size() == 2 && t->dims[1] == 1);
  if (!row || t->dims[0] != n_in) {
    return WrongShape(*t, "[" + std::to_string(n_in) + "] or [" + std::to_string(n_in) + ", 1]");
  }
  if (!TraitsOf(t->type).supported) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has type " +
                                   GgmlTypeName(t->type) + ", which kvserve cannot compute with " +
                                   "(supported: F32, F16, BF16, Q8_0, Q4_0)");
  }
  *out = WeightMatrix{.type = t->type,
                      .data = t->data,
                      .n_out = 1,
                      .n_in = n_in,
                      .row_bytes = RowBytes(t->type, n_in)};
  return Status::Ok();
}

Status WeightLoader::Vector(const std::string& name, int64_t n, WeightVector* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->n_elements != static_cast<uint64_t>(n) || t->dims[0] != n) {
    return WrongShape(*t, "[" + std::to_string(n) + "]");
  }
  if (!TraitsOf(t->type).supported) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has unsupported type " +
                                   GgmlTypeName(t->type));
  }
  out->host.resize(n);
  out->prepared = nullptr;
  DequantizeRow(t->type, t->data, n, out->host.data());
  return Status::Ok();
}

Status WeightLoader::Vector2d(const std::string& name, int64_t n0, int64_t n1,
                              WeightVector* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->dims.size() != 2 || t->dims[0] != n0 || t->dims[1] != n1) {
    return WrongShape(*t, "[" + std::to_string(n0) + ", " + std::to_string(n1) + "]");
  }
  if (!TraitsOf(t->type).supported || TraitsOf(t->type).block_elements != 1) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has type " +
                                   GgmlTypeName(t->type) + " (expected F32, F16 or BF16)");
  }
  out->host.resize(static_cast<size_t>(n0 * n1));
  out->prepared = nullptr;
  DequantizeRow(t->type, t->data, n0 * n1, out->host.data());
  return Status::Ok();
}

Status WeightLoader::ExpertVectors(const std::string& name, int64_t n_expert, int64_t n,
                                   std::vector<WeightVector>* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->dims.size() != 2 || t->dims[0] != n || t->dims[1] != n_expert) {
    return WrongShape(*t, "[" + std::to_string(n) + ", " + std::to_string(n_expert) + "]");
  }
  if (!TraitsOf(t->type).supported || TraitsOf(t->type).block_elements != 1) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has type " +
                                   GgmlTypeName(t->type) + " (expected F32, F16 or BF16)");
  }
  const size_t row_bytes = RowBytes(t->type, n);
  out->assign(n_expert, WeightVector{});
  for (int64_t e = 0; e < n_expert; ++e) {
    WeightVector& v = (*out)[e];
    v.host.resize(n);
    DequantizeRow(t->type, static_cast<const uint8_t*>(t->data) + e * row_bytes, n, v.host.data());
  }
  return Status::Ok();
}

Status WeightLoader::ExpertMatrices(const std::string& name, int64_t n_expert, int64_t n_out,
                                    int64_t n_in, std::vector<WeightMatrix>* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->dims.size() != 3 || t->dims[0] != n_in || t->dims[1] != n_out || t->dims[2] != n_expert) {
    return WrongShape(*t, "[" + std::to_string(n_in) + ", " + std::to_string(n_out) + ", " +
                              std::to_string(n_expert) + "]");
  }
  if (!TraitsOf(t->type).supported) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has type " +
                                   GgmlTypeName(t->type) + ", which kvserve cannot compute with");
  }
  const size_t row_bytes = RowBytes(t->type, n_in);
  const size_t expert_bytes = row_bytes * static_cast<size_t>(n_out);
  if (expert_bytes * static_cast<size_t>(n_expert) != t->n_bytes) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' holds " +
                                   std::to_string(t->n_bytes) + " bytes, expected " +
                                   std::to_string(n_expert) + " experts of " +
                                   std::to_string(expert_bytes));
  }
  out->assign(n_expert, WeightMatrix{});
  for (int64_t e = 0; e < n_expert; ++e) {
    (*out)[e] = WeightMatrix{.type = t->type,
                             .data = t->data + static_cast<size_t>(e) * expert_bytes,
                             .n_out = n_out,
                             .n_in = n_in,
                             .row_bytes = row_bytes};
  }
  return Status::Ok();
}

Status WeightLoader::Missing(const std::string& name) const {
  return Status::InvalidArgument(file_.path() + ": missing required tensor '" + name + "'");
}

Status WeightLoader::WrongShape(const TensorInfo& t, const std::string& expected) const {
  return Status::InvalidArgument(file_.path() + ": tensor '" + t.name + "' has shape " +
                                 t.ShapeString() + ", expected " + expected);
}

}  // namespace kvserve
