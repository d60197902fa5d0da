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

Status WeightLoader::Vector(const std::string& name, int64_t n, std::vector<float>* out) const {
  const TensorInfo* t = file_.FindTensor(name);
  if (t == nullptr) return Missing(name);
  if (t->n_elements != static_cast<uint64_t>(n) || t->dims[0] != n) {
    return WrongShape(*t, "[" + std::to_string(n) + "]");
  }
  if (!TraitsOf(t->type).supported) {
    return Status::InvalidArgument(file_.path() + ": tensor '" + name + "' has unsupported type " +
                                   GgmlTypeName(t->type));
  }
  out->resize(n);
  DequantizeRow(t->type, t->data, n, out->data());
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
