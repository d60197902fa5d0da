// thread_pool_test: ParallelOwnedChunks hands every index to exactly one thread; the counters
// behind `kvserve bench --profile` count jobs, the caller's waits and the workers' sleeps.
#include "util/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kvserve {
namespace {

// A slow thread takes fewer pieces: the others do the rest, its region's included.
TEST(ThreadPool, OwnedChunksGoToTheFreeThreads) {
  ThreadPool pool(2);
  std::vector<int64_t> indices(2, 0);
  pool.ParallelOwnedChunks(400, [&](int64_t begin, int64_t end, int thread) {
    indices[thread] += end - begin;
    if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_EQ(indices[0] + indices[1], 400);
  EXPECT_GT(indices[0], 200);
}

// Every index once; each thread's region [n t / T, n (t + 1) / T) is cut front to back into pieces
// of a third of what was left of it, whichever thread took them.
TEST(ThreadPool, OwnedChunksCoverEveryIndexOnceAndShrinkPerRegion) {
  ThreadPool pool(3);
  for (int64_t n : {1, 2, 7, 64, 1000}) {
    std::vector<std::atomic<int>> hits(n);
    std::mutex mutex;
    std::vector<std::pair<int64_t, int64_t>> pieces;
    std::atomic<int> bad_thread{0};
    pool.ParallelOwnedChunks(n, [&](int64_t begin, int64_t end, int thread) {
      if (thread < 0 || thread >= pool.size()) ++bad_thread;
      for (int64_t i = begin; i < end; ++i) ++hits[i];
      std::lock_guard<std::mutex> lock(mutex);
      pieces.emplace_back(begin, end);
    });
    EXPECT_EQ(bad_thread.load(), 0) << n;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n;
    std::sort(pieces.begin(), pieces.end());
    if (n == 1) continue;  // ran inline, one piece
    size_t p = 0;
    for (int t = 0; t < pool.size(); ++t) {
      const int64_t region_end = n * (t + 1) / pool.size();
      for (int64_t at = n * t / pool.size(); at < region_end; ++p) {
        ASSERT_LT(p, pieces.size()) << n;
        const int64_t expected = std::max<int64_t>(1, (region_end - at + 2) / 3);
        EXPECT_EQ(pieces[p].first, at) << n << " region " << t;
        EXPECT_EQ(pieces[p].second, at + expected) << n << " region " << t;
        at = pieces[p].second;
      }
    }
    EXPECT_EQ(p, pieces.size()) << n;
  }
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
  pool.ParallelFor(
      4, [](int64_t, int64_t) {}, 1);
  EXPECT_EQ(pool.counters().jobs, 2u);
}

}  // namespace
}  // namespace kvserve
