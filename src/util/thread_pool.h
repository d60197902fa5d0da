// A persistent pool of worker threads for the heavy loops (matmuls, attention). The calling thread
// takes part as worker 0, so a pool of size 1 runs everything inline. Workers spin briefly between
// jobs (a decode step issues hundreds of short jobs) and then sleep on a condition variable.
//
// Thread rules: Run/ParallelFor may be called from one thread at a time (the thread that owns the
// pool); the job must not call back into the same pool.
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
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

  // Work (multiply-adds) below which a ParallelFor runs inline; about 10 µs of one core.
  static constexpr int64_t kInlineCost = 1 << 16;

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
  void* job_ctx_ = nullptr;
  JobFn job_fn_ = nullptr;
};

// The number of hardware threads, at least 1.
int HardwareThreads();

}  // namespace kvserve
