// libFuzzer harness for the GGUF reader and the model loader. For any input bytes:
// - GgufFile::Parse either refuses them or yields a file whose every value and tensor is readable;
// - every typed getter either fails or returns values inside the input (touched here, so the
//   sanitizers see any out-of-bounds view);
// - a parsed file written back through GgufWriter parses again to the same metadata and tensors;
// - LoadModel (config, typed weights, the CPU backend's packing) either refuses the file with an
//   error or yields a model whose matrices lie inside the input and whose config is consistent;
//   a small loaded model then runs one forward pass of two tokens, which must not crash whatever
//   the weights hold (NaN, Inf, denormal scales).
// Any violation aborts (a crash for libFuzzer). Build and run with scripts/fuzz.sh.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/quantize.h"
#include "kv/kv_cache.h"
#include "model/model.h"

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

// The backend every input is loaded for, built once. AVX2 rather than scalar: the scalar table has
// no packed kernels, so packing (PrepareWeights' repacking of Q8_0/Q4_0, the packed matmuls, the
// unpacking of a tied embedding's rows) would go untested. AVX2 rather than the best ISA of the
// machine: the same kernels, and so the same coverage, on every fuzzing machine with AVX2 (a CPU
// without it falls back to scalar).
const kvserve::CpuBackend& Backend() {
  static const kvserve::CpuBackend backend(kvserve::CpuBackendOptions{.isa = "avx2", .pack = true});
  return backend;
}

// Only models within these run a forward pass, so that one input costs milliseconds at most: weight
// elements multiplied per token, and KV cache bytes.
constexpr uint64_t kMaxForwardElements = uint64_t{1} << 22;
constexpr uint64_t kMaxKvBytes = uint64_t{16} << 20;
constexpr int kBlockSize = 16;

void CheckConfig(const kvserve::ModelConfig& c) {
  const bool ok = c.n_vocab >= 0 && c.n_embd > 0 && c.n_layers > 0 && c.n_heads > 0 &&
                  c.n_kv_heads > 0 && c.n_ff > 0 && c.n_ctx_train > 0 &&
                  c.head_dim * c.n_heads == c.n_embd && c.n_heads % c.n_kv_heads == 0 &&
                  c.rope_dims > 0 && c.rope_dims <= c.head_dim && c.rope_dims % 2 == 0 &&
                  c.norm_eps > 0.0f && c.norm_eps <= 1.0f;
  Check(ok, "inconsistent config", c.arch);
  TouchBytes(c.arch.data(), c.arch.size());
  TouchBytes(c.name.data(), c.name.size());
}

// Touches every byte a matrix claims, in the stored layout and in the backend's copy; returns the
// matrix's element count.
uint64_t TouchMatrix(const kvserve::WeightMatrix& m, const std::string& arch) {
  Check((m.data != nullptr || m.n_out == 0) && m.n_out >= 0 && m.n_in > 0 &&
            m.row_bytes == kvserve::RowBytes(m.type, m.n_in),
        "bad matrix", arch);
  TouchBytes(m.data, m.row_bytes * static_cast<size_t>(m.n_out));
  if (m.packed != nullptr) {
    TouchBytes(m.packed, kvserve::PackedMatrixBytes(m.type, m.n_out, m.n_in));
  }
  return static_cast<uint64_t>(m.n_out) * static_cast<uint64_t>(m.n_in);
}

// Two tokens, the first and the last of the vocabulary (the ends of the embedding table), at
// positions 0 and 1 of one sequence, with logits for both; one token where the model has only one
// position.
void RunForward(const kvserve::Model& model) {
  const kvserve::ModelConfig& c = model.config();
  const int n = model.CheckContextSize(2).ok() ? 2 : 1;
  const kvserve::KvSpec spec = model.kv_spec();
  if (spec.BytesPerToken(kvserve::KvType::kF32) * kBlockSize > kMaxKvBytes) return;
  kvserve::KvCache kv(spec, kvserve::KvType::kF32, kBlockSize, 1, model.backend().allocator());
  kvserve::ForwardBatch batch;
  batch.tokens = {0, c.n_vocab - 1};
  batch.tokens.resize(n);
  // Every layer group's pool has one block: block 0 of each, slots 0 .. n - 1.
  batch.kv_groups.resize(spec.groups.size());
  for (kvserve::KvGroupBatch& group : batch.kv_groups) group.block_tables = {{0}};
  for (int i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.seq_index.push_back(0);
    for (kvserve::KvGroupBatch& group : batch.kv_groups) group.slots.push_back(i);
    batch.logit_rows.push_back(i);
  }
  auto workspace = model.backend().NewWorkspace(kvserve::WorkspaceOptions{.n_threads = 1});
  std::vector<float> logits(static_cast<size_t>(n) * c.n_vocab);
  model.Forward(batch, kv, *workspace, logits.data());
  TouchBytes(logits.data(), logits.size() * sizeof(float));
}

void LoadAndRun(kvserve::GgufFile file) {
  const std::string path = file.path();
  auto model = kvserve::LoadModel(std::move(file), Backend());
  if (!model.ok()) {
    Check(model.code() != kvserve::StatusCode::kOk, "error with code ok", model.message());
    Check(!model.message().empty(), "empty load error", path);
    return;
  }
  const kvserve::Model& m = **model;
  CheckConfig(m.config());
  Check(m.kv_spec().n_layers() == m.config().n_layers, "kv spec layers", m.config().arch);
  uint64_t elements = 0;
  for (const kvserve::WeightMatrix* matrix : m.matrices()) {
    elements += TouchMatrix(*matrix, m.config().arch);
  }
  // A vocabulary of 0 (token_embd [n_embd, 0]) loads, but there is no token to run.
  if (m.config().n_vocab > 0 && elements <= kMaxForwardElements) RunForward(m);
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
  RoundTrip(*file);
  LoadAndRun(std::move(file).value());
  return 0;
}
