// profiling_backend_test: the ProfilingBackend of `kvserve bench --profile` changes no result and
// accounts for every operation of a forward pass, and for the bytes its matmuls and attention read.
#include "kernels/profiling_backend.h"

#include <gtest/gtest.h>

#include <string>

#include "cli/cli_backend.h"
#include "support/forward.h"
#include "support/paths.h"

namespace kvserve {
namespace {

TEST(ProfilingBackend, SameLogitsAndEveryMatmulCounted) {
  const std::string path = testing::ModelPath("stories260K.gguf");
  auto plain = LoadModel(path, CliBackend());
  ASSERT_TRUE(plain.ok()) << plain.message();
  ProfilingBackend profiler(CliBackend());
  auto profiled = LoadModel(path, profiler);
  ASSERT_TRUE(profiled.ok()) << profiled.message();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378};
  const std::vector<float> want = testing::AllPositionLogits(**plain, tokens);
  profiler.Reset();
  const std::vector<float> got = testing::AllPositionLogits(**profiled, tokens);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "logit " << i;

  // One pass: each matrix multiplied once, so the matmul calls and bytes are the model's.
  uint64_t matmul_calls = 0, matmul_bytes = 0, model_bytes = 0;
  uint64_t attention_calls = 0, kv_bytes = 0;
  double seconds = 0;
  for (const ProfilingBackend::OpTotals& op : profiler.totals()) {
    EXPECT_GT(op.calls, 0u) << op.name;
    EXPECT_GE(op.seconds, op.wait_seconds) << op.name;
    seconds += op.seconds;
    if (op.name.rfind("matmul ", 0) == 0) {
      // "matmul Q4_K 64x64 + Q4_K 16x64": one call of MatmulSameInput, a matrix per part.
      uint64_t parts = 1;
      for (size_t at = op.name.find(" + "); at != std::string::npos;
           at = op.name.find(" + ", at + 1)) {
        ++parts;
      }
      matmul_calls += op.calls * parts;
      matmul_bytes += op.weight_bytes;
    } else {
      EXPECT_EQ(op.weight_bytes, 0u) << op.name;
    }
    if (op.name == "attention") {
      attention_calls = op.calls;
      kv_bytes = op.kv_bytes;
    } else {
      EXPECT_EQ(op.kv_bytes, 0u) << op.name;
    }
  }
  for (const WeightMatrix* m : (*profiled)->matrices()) {
    model_bytes += m->row_bytes * static_cast<uint64_t>(m->n_out);
  }
  EXPECT_EQ(matmul_calls, (*profiled)->matrices().size());
  EXPECT_EQ(matmul_bytes, model_bytes);
  const ModelConfig& config = (*profiled)->config();
  EXPECT_EQ(attention_calls, static_cast<uint64_t>(config.n_layers));
  // Token p reads keys 0..p, K and V of every KV head, in f32: 1 + 2 + ... + 5 = 15 rows a layer.
  EXPECT_EQ(kv_bytes, static_cast<uint64_t>(config.n_layers) * 15 * 2 * config.n_kv_heads *
                          config.head_dim * sizeof(float));
  EXPECT_GT(seconds, 0);
  const auto totals = profiler.totals();
  for (size_t i = 1; i < totals.size(); ++i) EXPECT_GE(totals[i - 1].seconds, totals[i].seconds);

  profiler.Reset();
  EXPECT_TRUE(profiler.totals().empty());
}

}  // namespace
}  // namespace kvserve
