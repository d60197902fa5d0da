// libFuzzer harness for the GGUF reader and the model loader. For any input bytes:
// - GgufFile::Parse either refuses them or yields a file whose every value and tensor is readable;
// - every typed getter either fails or returns values inside the input (touched here, so the
//   sanitizers see any out-of-bounds view);
// - ModelConfig / ModelWeights either refuse the file or load it;
// - a parsed file written back through GgufWriter parses again to the same metadata and tensors.
// Any violation aborts (a crash for libFuzzer). Build and run with scripts/fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace {

// Keeps reads from being optimised away.
volatile uint64_t g_sink = 0;

void Check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "gguf_fuzz: invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

void TouchBytes(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += b[i];
  g_sink = g_sink + sum;
}

void ReadEveryValue(const kvserve::GgufFile& file) {
  for (const auto& [key, value] : file.metadata()) {
    if (auto v = file.GetUint(key); v.ok()) g_sink = g_sink + *v;
    if (auto v = file.GetInt(key); v.ok()) g_sink = g_sink + static_cast<uint64_t>(*v);
    if (auto v = file.GetFloat(key); v.ok()) g_sink = g_sink + static_cast<uint64_t>(*v != 0);
    if (auto v = file.GetBool(key); v.ok()) g_sink = g_sink + *v;
    if (auto v = file.GetString(key); v.ok()) TouchBytes(v->data(), v->size());
    if (auto v = file.GetStringArray(key); v.ok()) {
      Check(v->size() == value.array_size, "string array size", key);
      for (std::string_view s : *v) TouchBytes(s.data(), s.size());
    }
    if (auto v = file.GetFloatArray(key); v.ok()) {
      Check(v->size() == value.array_size, "float array size", key);
      TouchBytes(v->data(), v->size() * sizeof(float));
    }
    if (auto v = file.GetIntArray(key); v.ok()) {
      Check(v->size() == value.array_size, "int array size", key);
      TouchBytes(v->data(), v->size() * sizeof(int64_t));
    }
    // A key that is not in the file must not be found. The probe name can be in a fuzzed file
    // too (the fuzzer learns it from this comparison), so only probe when it is absent.
    const std::string probe = key + "\x01missing";
    if (file.Find(probe) == nullptr) Check(!file.GetUint(probe).ok(), "missing key found", key);
  }
  for (const kvserve::TensorInfo& tensor : file.tensors()) {
    Check(file.FindTensor(tensor.name) == &tensor, "tensor index", tensor.name);
    TouchBytes(tensor.data, tensor.n_bytes);  // the whole claimed range must be inside the input
  }
}

void LoadModel(const kvserve::GgufFile& file) {
  auto config = kvserve::ModelConfig::FromGguf(file);
  if (!config.ok()) {
    Check(!config.message().empty(), "empty config error", file.path());
    return;
  }
  auto weights = kvserve::ModelWeights::FromGguf(file, *config);
  if (!weights.ok()) {
    Check(!weights.message().empty(), "empty weights error", file.path());
    return;
  }
  for (const kvserve::LayerWeights& layer : weights->layers) {
    TouchBytes(layer.attn_norm.data(), layer.attn_norm.size() * sizeof(float));
    TouchBytes(layer.ffn_norm.data(), layer.ffn_norm.size() * sizeof(float));
  }
}

void RoundTrip(const kvserve::GgufFile& file) {
  kvserve::GgufWriter writer(file.alignment());
  for (const auto& [key, value] : file.metadata()) writer.CopyValue(key, value);
  for (const kvserve::TensorInfo& t : file.tensors()) {
    writer.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::vector<uint8_t> bytes = writer.Serialize();
  auto again = kvserve::GgufFile::Parse(bytes.data(), bytes.size(), "round-trip");
  Check(again.ok(), "written file does not parse", again.ok() ? "" : again.message());
  Check(again->metadata().size() == file.metadata().size(), "metadata count", "");
  for (const auto& [key, value] : file.metadata()) {
    const kvserve::GgufValue* copy = again->Find(key);
    Check(copy != nullptr, "key lost", key);
    Check(copy->type == value.type && copy->u == value.u && copy->i == value.i &&
              copy->str == value.str && copy->array_type == value.array_type &&
              copy->array_size == value.array_size,
          "value changed", key);
  }
  Check(again->tensors().size() == file.tensors().size(), "tensor count", "");
  for (size_t i = 0; i < file.tensors().size(); ++i) {
    const kvserve::TensorInfo& a = file.tensors()[i];
    const kvserve::TensorInfo& b = again->tensors()[i];
    Check(a.name == b.name && a.type == b.type && a.dims == b.dims && a.n_bytes == b.n_bytes &&
              std::memcmp(a.data, b.data, a.n_bytes) == 0,
          "tensor changed", a.name);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kvserve::GgufFile::Parse(data, size, "fuzz.gguf");
  if (!file.ok()) {
    Check(file.message().rfind("fuzz.gguf: ", 0) == 0, "error without the source name",
          file.message());
    return 0;
  }
  ReadEveryValue(*file);
  LoadModel(*file);
  RoundTrip(*file);
  return 0;
}
