// The /health watchdog (issue 17, part 5): StepWatchdog with its own clock, then a real
// `kvserve serve` whose engine thread is stopped by ptrace while a request waits (503 "stuck"),
// and one that idles and works past a short --watchdog-s (200 throughout). Liveness apart from
// readiness (issue 33, part 4): a stalled engine fails /livez and /readyz; a draining one fails
// /readyz and /health but stays live for a drain longer than --watchdog-s.
#include "server/step_watchdog.h"

#include <dirent.h>
#include <sys/ptrace.h>

#include <future>

#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers
using Clock = StepWatchdog::Clock;

Clock::time_point At(double s) {
  return Clock::time_point(
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1000.0 + s)));
}

TEST(StepWatchdogTest, IdleIsNeverStuck) {
  StepWatchdog watchdog(2.0);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(watchdog.Observe(7, false, At(i * 10.0)).stuck);
}

TEST(StepWatchdogTest, StepsThatMoveAreNeverStuck) {
  StepWatchdog watchdog(2.0);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(watchdog.Observe(i, true, At(i * 1.5)).stuck);
}

TEST(StepWatchdogTest, NoStepWithWorkPendingForTheTimeoutIsStuck) {
  StepWatchdog watchdog(2.0);
  EXPECT_FALSE(watchdog.Observe(5, true, At(0)).stuck);
  StepWatchdog::Verdict v = watchdog.Observe(5, true, At(1.9));
  EXPECT_FALSE(v.stuck);
  EXPECT_NEAR(v.stalled_s, 1.9, 1e-6);
  v = watchdog.Observe(5, true, At(2.0));
  EXPECT_TRUE(v.stuck);
  EXPECT_NEAR(v.stalled_s, 2.0, 1e-6);
  EXPECT_TRUE(watchdog.Observe(5, true, At(60)).stuck);
  // One step and it is healthy again, and the stall is counted afresh.
  EXPECT_FALSE(watchdog.Observe(6, true, At(61)).stuck);
  EXPECT_FALSE(watchdog.Observe(6, true, At(62.5)).stuck);
  EXPECT_TRUE(watchdog.Observe(6, true, At(63)).stuck);
  // The work finished (or was aborted) without a step: idle, healthy.
  EXPECT_FALSE(watchdog.Observe(6, false, At(64)).stuck);
}

TEST(StepWatchdogTest, AStallBeginsWhenWorkArrives) {
  StepWatchdog watchdog(2.0);
  EXPECT_FALSE(watchdog.Observe(3, false, At(0)).stuck);
  // Work arrives after a long idle time at the same step count: not stuck yet.
  EXPECT_FALSE(watchdog.Observe(3, true, At(100)).stuck);
  EXPECT_FALSE(watchdog.Observe(3, true, At(101)).stuck);
  EXPECT_TRUE(watchdog.Observe(3, true, At(102)).stuck);
}

TEST(StepWatchdogTest, ZeroIsOff) {
  StepWatchdog watchdog(0);
  EXPECT_FALSE(watchdog.Observe(1, true, At(0)).stuck);
  const StepWatchdog::Verdict v = watchdog.Observe(1, true, At(1e6));
  EXPECT_FALSE(v.stuck);
  EXPECT_GT(v.stalled_s, 0);
}

// The thread id of the serve child's engine thread (named by Engine::Create), or -1.
pid_t EngineThread(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* tasks = opendir(dir.c_str());
  if (!tasks) return -1;
  pid_t found = -1;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    std::string comm = ReadAll(dir + "/" + entry->d_name + "/comm");
    if (comm.rfind("kvserve-engine", 0) == 0) found = std::stoi(entry->d_name);
  }
  closedir(tasks);
  return found;
}

// Stops only the serve child's engine thread (the HTTP threads go on) and returns its id, or -1
// after a failure. The thread is the test's child's, so ptrace may attach to it; PTRACE_DETACH
// lets it go on. This is the test hook for a hung engine: no option in kvserve stalls its loop.
pid_t StopEngineThread(pid_t pid) {
  const pid_t engine = EngineThread(pid);
  if (engine <= 0) {
    ADD_FAILURE() << "no kvserve-engine thread";
    return -1;
  }
  if (ptrace(PTRACE_SEIZE, engine, nullptr, nullptr) != 0 ||
      ptrace(PTRACE_INTERRUPT, engine, nullptr, nullptr) != 0) {
    ADD_FAILURE() << "ptrace: " << std::strerror(errno);
    return -1;
  }
  int status = 0;
  if (waitpid(engine, &status, __WALL) != engine) {
    ADD_FAILURE() << "waitpid: " << std::strerror(errno);
    return -1;
  }
  return engine;
}

// Waits until the engine counts no request running or waiting (it counts a finished request out
// after answering it).
void WaitIdle(httplib::Client& client) {
  for (int i = 0; i < 500; ++i) {
    const std::string metrics = Get(client, "/metrics").text;
    if (Metric(metrics, "kvserve:num_requests_running") +
            Metric(metrics, "kvserve:num_requests_waiting") ==
        0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

const json kRequest = {{"prompt", "Once upon a time, Tom and his mom went to the big store"},
                       {"max_tokens", 8},
                       {"temperature", 0}};

TEST(ServerWatchdogTest, IdleAndWorkingEngineStaysHealthy) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--watchdog-s", "1"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(Get(*client, "/health").status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(700));  // idle past the watchdog
    EXPECT_EQ(Get(*client, "/health").status, 200);
    EXPECT_EQ(Post(*client, "/v1/completions", kRequest).status, 200);
  }
  EXPECT_EQ(server->Terminate(), 0);
}

TEST(ServerWatchdogTest, StoppedStepLoopTurnsHealthUnhealthy) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--watchdog-s", "1"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  EXPECT_EQ(Post(*client, "/v1/completions", kRequest).status, 200);
  // Wait until the step loop has counted the request out, or a stop in between would leave it
  // counted below.
  WaitIdle(*client);
  const pid_t engine = StopEngineThread(server->pid());
  ASSERT_GT(engine, 0);
  EXPECT_EQ(Get(*client, "/health").status, 200);  // nothing pending: a stopped idle loop is fine
  auto waiting = std::async(std::launch::async, [&] {
    auto other = server->Client();
    return Post(*other, "/v1/completions", kRequest).status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Get(*client, "/health").status, 200);  // the stall is seen from here on
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  Reply stuck = Get(*client, "/health");
  EXPECT_EQ(stuck.status, 503) << stuck.text;
  EXPECT_EQ(stuck.body["status"], "stuck") << stuck.text;
  EXPECT_GE(stuck.body["stalled_s"].get<double>(), 1.0);
  EXPECT_EQ(stuck.body["waiting"].get<int>() + stuck.body["running"].get<int>(), 1);
  // Let the loop go on: the request finishes and /health is 200 again.
  ASSERT_EQ(ptrace(PTRACE_DETACH, engine, nullptr, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(waiting.get(), 200);
  EXPECT_EQ(Get(*client, "/health").status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

// A stalled engine fails liveness (and readiness): /livez 503 "stuck" once the step count has
// stood still past --watchdog-s with a request waiting, 200 again when the loop goes on.
TEST(ServerLivenessTest, StalledEngineFailsLivezAndReadyz) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start({"--watchdog-s", "1"});
  ASSERT_NE(server, nullptr);
  auto client = server->Client();
  EXPECT_EQ(Post(*client, "/v1/completions", kRequest).status, 200);
  WaitIdle(*client);
  const Reply live = Get(*client, "/livez");
  EXPECT_EQ(live.status, 200) << live.text;
  EXPECT_EQ(live.body["state"], "ready") << live.text;
  EXPECT_EQ(Get(*client, "/readyz").status, 200);
  const pid_t engine = StopEngineThread(server->pid());
  ASSERT_GT(engine, 0);
  EXPECT_EQ(Get(*client, "/livez").status, 200);  // stopped but idle: alive
  auto waiting = std::async(std::launch::async, [&] {
    auto other = server->Client();
    return Post(*other, "/v1/completions", kRequest).status;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(Get(*client, "/livez").status, 200);  // the stall is seen from here on
  std::this_thread::sleep_for(std::chrono::milliseconds(1300));
  const Reply stuck = Get(*client, "/livez");
  EXPECT_EQ(stuck.status, 503) << stuck.text;
  EXPECT_EQ(stuck.body["status"], "stuck") << stuck.text;
  EXPECT_GE(stuck.body["stalled_s"].get<double>(), 1.0);
  const Reply not_ready = Get(*client, "/readyz");
  EXPECT_EQ(not_ready.status, 503) << not_ready.text;
  EXPECT_EQ(not_ready.body["status"], "stuck") << not_ready.text;
  ASSERT_EQ(ptrace(PTRACE_DETACH, engine, nullptr, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(waiting.get(), 200);
  EXPECT_EQ(Get(*client, "/livez").status, 200);
  EXPECT_EQ(Get(*client, "/readyz").status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

// Probes /readyz, /livez and /health of a draining server every 50 ms until its listener closes:
// each must say draining, 503, 200 and 503. Returns how long it was seen draining, in seconds.
// While `engine` > 0 (a ptrace-stopped engine thread) and for the first `throttle_s` seconds, the
// engine runs 10 ms in every 300 (a slow drain, each pause shorter than --watchdog-s), then goes
// on freely.
double WatchDrain(httplib::Client& client, pid_t engine, double throttle_s) {
  const auto start = std::chrono::steady_clock::now();
  double drained_s = 0;
  int seen = 0;
  for (;;) {
    const double t =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (engine > 0 && t >= throttle_s) {
      EXPECT_EQ(ptrace(PTRACE_DETACH, engine, nullptr, nullptr), 0) << std::strerror(errno);
      engine = -1;
    }
    const Reply ready = Get(client, "/readyz");
    const Reply alive = Get(client, "/livez");
    const Reply health = Get(client, "/health");
    if (ready.status == 0 || alive.status == 0 || health.status == 0) break;  // drained
    ++seen;
    drained_s = t;
    EXPECT_EQ(ready.status, 503) << ready.text;
    EXPECT_EQ(ready.body.value("status", ""), "draining") << ready.text;
    EXPECT_EQ(health.status, 503) << health.text;
    EXPECT_EQ(alive.status, 200) << "a draining server failed liveness: " << alive.text;
    EXPECT_EQ(alive.body.value("state", ""), "draining") << alive.text;
    if (engine > 0) {  // let the engine run 10 ms, then stop it again
      EXPECT_EQ(ptrace(PTRACE_CONT, engine, nullptr, nullptr), 0) << std::strerror(errno);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ(ptrace(PTRACE_INTERRUPT, engine, nullptr, nullptr), 0) << std::strerror(errno);
      int status = 0;
      EXPECT_EQ(waitpid(engine, &status, __WALL), engine);
      std::this_thread::sleep_for(std::chrono::milliseconds(290));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_GT(seen, 0);
  if (engine > 0) ptrace(PTRACE_DETACH, engine, nullptr, nullptr);
  return drained_s;
}

// A draining server is not ready (/readyz and /health 503 "draining") but alive (/livez 200) for
// the whole drain, made slower than --watchdog-s: the engine thread is let run 10 ms in every 300
// (by ptrace) while twelve long requests finish one at a time.
TEST(ServerLivenessTest, DrainingServerStaysLiveButNotReady) {
  signal(SIGPIPE, SIG_IGN);
  auto server = ServeProcess::Start(
      {"--watchdog-s", "1", "-c", "512", "--max-num-seqs", "1", "--http-threads", "32"});
  ASSERT_NE(server, nullptr);
  const json long_request = {{"prompt", "Once upon a time"},
                             {"max_tokens", 480},
                             {"ignore_eos", true},
                             {"temperature", 0}};
  constexpr int kRequests = 12;
  auto client = server->Client();
  const pid_t engine = StopEngineThread(server->pid());
  ASSERT_GT(engine, 0);
  std::vector<std::future<int>> requests;
  for (int i = 0; i < kRequests; ++i) {
    requests.push_back(std::async(std::launch::async, [&] {
      auto other = server->Client();
      return Post(*other, "/v1/completions", long_request).status;
    }));
  }
  for (int i = 0; i < 500; ++i) {  // until all are submitted (the stopped engine holds them)
    const std::string metrics = Get(*client, "/metrics").text;
    if (Metric(metrics, "kvserve:num_requests_running") +
            Metric(metrics, "kvserve:num_requests_waiting") ==
        kRequests) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(kill(server->pid(), SIGTERM), 0);
  for (int i = 0; i < 200 && Get(*client, "/readyz").status == 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const double drained_s = WatchDrain(*client, engine, 2.0);
  EXPECT_GT(drained_s, 1.5) << "the drain was not longer than --watchdog-s";
  for (auto& request : requests) EXPECT_EQ(request.get(), 200);
  int status = 0;
  ASSERT_EQ(waitpid(server->pid(), &status, 0), server->pid());
  server->Forget();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace kvserve
