#include "util/thread_pool.h"

#include <immintrin.h>

#include "util/crash_handler.h"

namespace kvserve {

namespace {
// Spin iterations before a worker goes to sleep: long enough to bridge the gap between the jobs of
// one forward pass, short enough that an idle pool costs nothing.
constexpr int kSpinIterations = 2000;
}  // namespace

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads <= 0 ? HardwareThreads() : n_threads) {
  for (int t = 1; t < n_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& worker : workers_) worker.join();
}

void ThreadPool::RunErased(void* ctx, JobFn fn) {
  if (n_threads_ == 1) {
    fn(ctx, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ctx_ = ctx;
    job_fn_ = fn;
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  fn(ctx, 0);
  // Wait for the workers; yield now and then so that a descheduled worker on a busy machine can
  // run instead of this thread burning its time slice.
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::WorkerLoop(int thread) {
  ArmThreadForCrashReports();
  uint64_t seen = 0;
  for (;;) {
    int spins = 0;
    while (generation_.load(std::memory_order_acquire) == seen && spins < kSpinIterations) {
      _mm_pause();
      ++spins;
    }
    if (generation_.load(std::memory_order_acquire) == seen) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load() != seen; });
    }
    seen = generation_.load(std::memory_order_acquire);
    if (stop_.load()) return;
    // job_ctx_/job_fn_ were written before the release of generation_ that we acquired, and are
    // not rewritten until every worker has decremented pending_.
    job_fn_(job_ctx_, thread);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace kvserve
