// profiling_backend_test: the ProfilingBackend of `kvserve bench --profile` changes no result and
// accounts for every operation of a forward pass; the thread pool's counters count.
#include "kernels/profiling_backend.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "cli/cli_backend.h"
#include "support/forward.h"
#include "support/paths.h"
#include "util/thread_pool.h"

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
  uint64_t attention_calls = 0;
  double seconds = 0;
  for (const ProfilingBackend::OpTotals& op : profiler.totals()) {
    EXPECT_GT(op.calls, 0u) << op.name;
    EXPECT_GE(op.seconds, op.wait_seconds) << op.name;
    seconds += op.seconds;
    if (op.name.rfind("matmul ", 0) == 0) {
      matmul_calls += op.calls;
      matmul_bytes += op.weight_bytes;
    } else {
      EXPECT_EQ(op.weight_bytes, 0u) << op.name;
    }
    if (op.name == "attention") attention_calls = op.calls;
  }
  for (const WeightMatrix* m : (*profiled)->matrices()) {
    model_bytes += m->row_bytes * static_cast<uint64_t>(m->n_out);
  }
  EXPECT_EQ(matmul_calls, (*profiled)->matrices().size());
  EXPECT_EQ(matmul_bytes, model_bytes);
  EXPECT_EQ(attention_calls, static_cast<uint64_t>((*profiled)->config().n_layers));
  EXPECT_GT(seconds, 0);
  const auto totals = profiler.totals();
  for (size_t i = 1; i < totals.size(); ++i) EXPECT_GE(totals[i - 1].seconds, totals[i].seconds);

  profiler.Reset();
  EXPECT_TRUE(profiler.totals().empty());
}

TEST(ThreadPoolCounters, JobsWaitsAndSleeps) {
  ThreadPool pool(2);
  ThreadPool::Counters before = pool.counters();
  EXPECT_EQ(before.jobs, 0u);
  // Worker 1 is slow: the caller waits for it.
  pool.Run([](int thread) {
    if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  ThreadPool::Counters after = pool.counters();
  EXPECT_EQ(after.jobs, 1u);
  EXPECT_GE(ThreadPool::TicksToSeconds(after.wait_ticks), 0.010);
  // Idle for far longer than the spin: the worker goes to sleep (and is woken by the next job).
  std::this_thread::sleep_for(std::chrono::nanoseconds(ThreadPool::kSpinNanoseconds * 20));
  EXPECT_GE(pool.counters().worker_sleeps, 1u);
  int ran = 0;
  pool.Run([&](int thread) {
    if (thread == 1) ran = 1;
  });
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(pool.counters().jobs, 2u);
  // An inline ParallelFor (below kInlineCost) hands nothing to the workers.
  pool.ParallelFor(4, [](int64_t, int64_t) {}, 1);
  EXPECT_EQ(pool.counters().jobs, 2u);
}

}  // namespace
}  // namespace kvserve
