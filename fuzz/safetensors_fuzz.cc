// libFuzzer harness for the safetensors reader and config.json parsing. For any input bytes:
// - SafetensorsFile::Parse either refuses them or yields tensors that lie inside the input, in
//   offset order, back to back, each of exactly product(shape) * element size bytes (every byte
//   is touched here, so the sanitizers see an out-of-bounds view);
// - ParseHfConfig (the architecture registry's classes) of the same bytes as text either refuses
//   them or gives positive sizes, a head size that tiles the hidden size unless head_dim was
//   given, and a head count that the KV head count divides.
// Any violation aborts. Build: scripts/fuzz.sh configures build-fuzz/; then
//   ninja -C build-fuzz safetensors_fuzz && build-fuzz/fuzz/safetensors_fuzz -max_total_time=60
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/hf_families.h"

namespace {

volatile uint64_t g_sink = 0;

void Check(bool ok, const char* what, const std::string& detail) {
  if (ok) return;
  std::fprintf(stderr, "safetensors_fuzz: invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

// Bytes per element of each type the reader yields (safetensors.h): F32, F16, BF16, I8 (U8), I32,
// I64.
uint64_t ElementBytes(kvserve::GgmlType type) {
  switch (type) {
    case kvserve::GgmlType::kF32:
    case kvserve::GgmlType::kI32:
      return 4;
    case kvserve::GgmlType::kI64:
      return 8;
    case kvserve::GgmlType::kI8:
      return 1;
    default:
      return 2;  // F16, BF16
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = kvserve::SafetensorsFile::Parse(data, size, "fuzz");
  if (file.ok()) {
    uint64_t expected = 0;
    for (const kvserve::SafetensorsTensor& t : file->tensors()) {
      Check(t.offset == expected, "tensors back to back", t.name);
      Check(t.data >= data && t.data + t.n_bytes <= data + size, "tensor inside input", t.name);
      uint64_t n = 1;
      for (int64_t dim : t.shape) n *= static_cast<uint64_t>(dim);
      const uint64_t element = ElementBytes(t.type);
      Check(n == t.n_elements && n * element == t.n_bytes, "size matches shape", t.name);
      Check(file->Find(t.name) == &t, "index finds tensor", t.name);
      uint64_t sum = 0;
      for (uint64_t i = 0; i < t.n_bytes; ++i) sum += t.data[i];
      g_sink = g_sink + sum;
      expected += t.n_bytes;
    }
  }
  auto config =
      kvserve::ParseHfConfig(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  if (config.ok()) {
    const kvserve::HfConfig& c = *config;
    Check(c.n_embd > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 && c.head_dim > 0 &&
              c.n_heads % c.n_kv_heads == 0,
          "config sizes", c.architecture);
    Check(c.head_dim_given || c.head_dim * c.n_heads == c.n_embd, "head size tiles the hidden size",
          c.architecture);
  }
  return 0;
}
