// A persistent pool of worker threads for the heavy loops (matmuls, attention). The calling thread
// takes part as worker 0, so a pool of size 1 runs everything inline. Workers spin for a fixed time
// between jobs (a decode step issues hundreds of short jobs) and then sleep on a condition
// variable. The spin is timed, not counted: one `pause` takes 10x longer on some CPUs than on
// others, so a count of pauses bridged the gaps of a decode step on one CPU and slept through
// them on another.
//
// Thread rules: Run/ParallelFor may be called from one thread at a time (the thread that owns the
// pool); the job must not call back into the same pool.
#pragma once

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace kvserve {

class ThreadPool {
 public:
  // n_threads <= 0 means one per hardware thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Calls fn(thread_index) once on each of size() threads and returns when all have finished.
  template <typename Fn>
  void Run(Fn&& fn) {
    RunErased(&fn, [](void* ctx, int thread) { (*static_cast<Fn*>(ctx))(thread); });
  }

  // Splits [0, n) into size() contiguous, near-equal ranges; fn(begin, end) for each non-empty one,
  // or fn(begin, end, thread) when fn takes a third argument (the index of the running thread,
  // for per-thread scratch).
  // `cost` is the total work in multiply-adds (or similar): below kInlineCost per thread the job
  // runs on the calling thread alone, since waking workers would cost more than it saves.
  template <typename Fn>
  void ParallelFor(int64_t n, Fn&& fn, int64_t cost = INT64_MAX) {
    auto call = [&](int64_t begin, int64_t end, int thread) {
      if constexpr (std::is_invocable_v<Fn, int64_t, int64_t, int>) {
        fn(begin, end, thread);
      } else {
        fn(begin, end);
      }
    };
    if (n_threads_ == 1 || n <= 1 || cost < kInlineCost) {
      if (n > 0) call(int64_t{0}, n, 0);
      return;
    }
    const int parts = n_threads_;
    Run([&](int thread) {
      const int64_t begin = n * thread / parts;
      const int64_t end = n * (thread + 1) / parts;
      if (begin < end) call(begin, end, thread);
    });
  }

  // As ParallelFor with a thread index, but the threads take pieces of [0, n) as they finish
  // (fn(begin, end, thread) per piece), and the pieces shrink: [0, n) is cut into size()
  // contiguous regions, one per thread; each thread takes pieces of 1 / kShrink of what is left of
  // its own region, from its front, so its pieces follow one another in memory (one stream for
  // the hardware prefetcher, as under a static split), and then pieces of the others' regions. A
  // thread slowed by the machine (another tenant, a later wake-up, a farther memory node) does
  // fewer pieces instead of holding up the rest. Which thread runs a piece changes from call to
  // call, so fn must give the same result on any thread.
  template <typename Fn>
  void ParallelOwnedChunks(int64_t n, Fn&& fn, int64_t cost = INT64_MAX) {
    if (n_threads_ == 1 || n <= 1 || cost < kInlineCost) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    const int parts = n_threads_;
    for (int t = 0; t < parts; ++t) {
      regions_[t].next.store(n * t / parts, std::memory_order_relaxed);
      regions_[t].end = n * (t + 1) / parts;
    }
    Run([&](int thread) {
      for (int i = 0; i < parts; ++i) {
        Region& region = regions_[(thread + i) % parts];
        int64_t begin = region.next.load(std::memory_order_relaxed);
        while (begin < region.end) {
          const int64_t size = std::max<int64_t>(1, (region.end - begin + kShrink - 1) / kShrink);
          const int64_t end = std::min(region.end, begin + size);
          if (region.next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) {
            fn(begin, end, thread);
            begin = region.next.load(std::memory_order_relaxed);
          }
        }
      }
    });
  }
  static constexpr int kShrink = 3;

  // Work (multiply-adds) below which a ParallelFor runs inline; about 10 µs of one core.
  static constexpr int64_t kInlineCost = 1 << 16;

  // How long an idle worker spins before it sleeps, and the caller before it yields.
  static constexpr int64_t kSpinNanoseconds = 200'000;

  // Running totals since construction, for profiles (`kvserve bench --profile`). Read them from
  // the owning thread between jobs.
  struct Counters {
    uint64_t jobs = 0;           // Run calls that used the workers
    uint64_t wait_ticks = 0;     // TSC ticks the caller spent waiting for workers after its part
    uint64_t worker_sleeps = 0;  // times a worker found no job within the spin and slept
  };
  Counters counters() const {
    Counters c = counters_;
    c.worker_sleeps = worker_sleeps_.load(std::memory_order_relaxed);
    return c;
  }
  // Seconds of `ticks` TSC ticks (the rate is measured once, over 20 ms, at the first call).
  static double TicksToSeconds(uint64_t ticks);

 private:
  using JobFn = void (*)(void* ctx, int thread);
  void RunErased(void* ctx, JobFn fn);
  void WorkerLoop(int thread);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};  // bumped once per job
  std::atomic<int> pending_{0};          // workers still running the current job
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> worker_sleeps_{0};
  Counters counters_;  // jobs and wait_ticks: written by the owning thread only
  // One per thread, for ParallelOwnedChunks: written by the owning thread before a job.
  struct alignas(64) Region {
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::unique_ptr<Region[]> regions_;
  void* job_ctx_ = nullptr;
  JobFn job_fn_ = nullptr;
};

// The number of hardware threads, at least 1.
int HardwareThreads();

}  // namespace kvserve
