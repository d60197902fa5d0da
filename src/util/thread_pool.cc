#include "util/thread_pool.h"

#include <immintrin.h>
#include <x86intrin.h>

#include <chrono>

#include "util/crash_handler.h"

namespace kvserve {

namespace {

// Pauses between two reads of the clock while spinning (a read costs about 20 ns).
constexpr int kPausesPerClockRead = 16;

// Spins (pause) until done() or ThreadPool::kSpinNanoseconds have passed; true if done() came
// first. Long enough to bridge the gap between the jobs of one forward pass, short enough that
// an idle pool costs nothing.
template <typename Done>
bool SpinUntil(Done&& done) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::nanoseconds(ThreadPool::kSpinNanoseconds);
  for (;;) {
    for (int i = 0; i < kPausesPerClockRead; ++i) {
      if (done()) return true;
      _mm_pause();
    }
    if (Clock::now() >= deadline) return done();
  }
}

}  // namespace

double ThreadPool::TicksToSeconds(uint64_t ticks) {
  static const double seconds_per_tick = [] {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    const uint64_t c0 = __rdtsc();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const uint64_t c1 = __rdtsc();
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return c1 > c0 ? seconds / static_cast<double>(c1 - c0) : 0.0;
  }();
  return static_cast<double>(ticks) * seconds_per_tick;
}

int HardwareThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads <= 0 ? HardwareThreads() : n_threads),
      regions_(std::make_unique<Region[]>(static_cast<size_t>(n_threads_))) {
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
  // Wait for the workers; after the spin, yield so that a descheduled worker on a busy machine can
  // run instead of this thread burning its time slice.
  const uint64_t wait_start = __rdtsc();
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!SpinUntil(finished)) {
    while (!finished()) std::this_thread::yield();
  }
  counters_.wait_ticks += __rdtsc() - wait_start;
  ++counters_.jobs;
}

void ThreadPool::WorkerLoop(int thread) {
  ArmThreadForCrashReports();
  uint64_t seen = 0;
  for (;;) {
    const bool woken =
        SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
    if (!woken) {
      worker_sleeps_.fetch_add(1, std::memory_order_relaxed);
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
