// thread_pool_test: ParallelShrinkingChunks hands every index to exactly one thread; the counters
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

// A slow thread takes fewer pieces: the others do the rest.
TEST(ThreadPool, ShrinkingChunksGoToTheFreeThreads) {
  ThreadPool pool(2);
  std::vector<int64_t> indices(2, 0);
  pool.ParallelShrinkingChunks(400, 1, [&](int64_t begin, int64_t end, int thread) {
    indices[thread] += end - begin;
    if (thread == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  });
  EXPECT_EQ(indices[0] + indices[1], 400);
  EXPECT_GT(indices[0], indices[1]);
}

TEST(ThreadPool, ShrinkingChunksCoverEveryIndexOnceAndShrink) {
  ThreadPool pool(3);
  for (int64_t n : {1, 7, 64, 1000}) {
    for (int64_t min_chunk : {1, 3, 64, 5000}) {
      std::vector<std::atomic<int>> hits(n);
      std::mutex mutex;
      std::vector<std::pair<int64_t, int64_t>> pieces;
      std::atomic<int> bad_thread{0};
      pool.ParallelShrinkingChunks(n, min_chunk, [&](int64_t begin, int64_t end, int thread) {
        if (thread < 0 || thread >= pool.size()) ++bad_thread;
        for (int64_t i = begin; i < end; ++i) ++hits[i];
        std::lock_guard<std::mutex> lock(mutex);
        pieces.emplace_back(begin, end);
      });
      EXPECT_EQ(bad_thread.load(), 0) << n << " " << min_chunk;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << n << " " << min_chunk;
      std::sort(pieces.begin(), pieces.end());
      for (size_t p = 0; p < pieces.size(); ++p) {
        const int64_t size = pieces[p].second - pieces[p].first;
        // Every piece but the last is at least min_chunk; none is larger than the one before it
        // by more than rounding (each is a fraction of what was left when it was taken).
        if (p + 1 < pieces.size()) {
          EXPECT_GE(size, std::min(min_chunk, n)) << n << " " << p;
        }
        if (p > 0 && size > min_chunk) {
          EXPECT_LE(size, pieces[p - 1].second - pieces[p - 1].first) << n << " " << p;
        }
      }
      if (n == 1000 && min_chunk == 1) {
        // 1000 / 9 first, then smaller and smaller down to single indices.
        EXPECT_EQ(pieces.front().second - pieces.front().first, 112);
        EXPECT_EQ(pieces.back().second - pieces.back().first, 1);
      }
    }
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
