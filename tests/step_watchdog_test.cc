// The /health watchdog (issue 17, part 5): StepWatchdog with its own clock, then a real
// `kvserve serve` whose engine thread is stopped by ptrace while a request waits (503 "stuck" on
// /health, /readyz and /livez), and one that idles and works past a short --watchdog-s (200
// throughout).
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
  // The engine counts the finished request out after it has answered: wait until its step loop
  // has, or a stop in between would leave it counted below.
  for (int i = 0; i < 500; ++i) {
    const std::string metrics = Get(*client, "/metrics").text;
    if (Metric(metrics, "kvserve:num_requests_running") +
            Metric(metrics, "kvserve:num_requests_waiting") ==
        0) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const pid_t engine = EngineThread(server->pid());
  ASSERT_GT(engine, 0) << "no kvserve-engine thread";
  // Stop only the engine thread (the HTTP threads go on): it is the parent's child, so ptrace
  // may attach to it.
  ASSERT_EQ(ptrace(PTRACE_SEIZE, engine, nullptr, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(ptrace(PTRACE_INTERRUPT, engine, nullptr, nullptr), 0) << std::strerror(errno);
  int status = 0;
  ASSERT_EQ(waitpid(engine, &status, __WALL), engine);
  EXPECT_EQ(Get(*client, "/health").status, 200);  // nothing pending: a stopped idle loop is fine
  EXPECT_EQ(Get(*client, "/livez").status, 200);
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
  // Liveness sees it too (the pod is restarted), and readiness (it takes no traffic meanwhile).
  Reply live = Get(*client, "/livez");
  EXPECT_EQ(live.status, 503) << live.text;
  EXPECT_EQ(live.body["status"], "stuck") << live.text;
  EXPECT_EQ(Get(*client, "/readyz").status, 503);
  // Let the loop go on: the request finishes and /health is 200 again.
  ASSERT_EQ(ptrace(PTRACE_DETACH, engine, nullptr, nullptr), 0) << std::strerror(errno);
  EXPECT_EQ(waiting.get(), 200);
  EXPECT_EQ(Get(*client, "/health").status, 200);
  EXPECT_EQ(Get(*client, "/livez").status, 200);
  EXPECT_EQ(server->Terminate(), 0);
}

}  // namespace
}  // namespace kvserve
