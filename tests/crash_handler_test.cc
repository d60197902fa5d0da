// Crash reports (issue 17, part 7): a forked child that installs the handler and then faults,
// aborts or overflows its stack prints the signal and its stack to stderr and dies of the same
// signal; a real `kvserve serve` sent SIGSEGV and SIGABRT writes the report to its log and dies of
// them.
#include "util/crash_handler.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <thread>
#include <vector>

#include "util/thread_pool.h"

#include "support/serve_process.h"

namespace kvserve {
namespace {

using namespace ::kvserve::testing;  // NOLINT: test helpers

struct Crash {
  int signal = 0;  // what the child died of; 0 if it exited
  std::string stderr_text;
};

// Runs `body` in a child with the handler installed, its stderr into a pipe.
template <typename F>
Crash RunChild(F body) {
  int fds[2];
  EXPECT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    if (!InstallCrashHandler("crash-child")) _exit(3);
    body();
    _exit(0);
  }
  close(fds[1]);
  Crash crash;
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof(buffer))) > 0;)
    crash.stderr_text.append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFSIGNALED(status)) crash.signal = WTERMSIG(status);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) ADD_FAILURE() << "sanitizer build";
  return crash;
}

int StackLines(const std::string& text) {
  const size_t from = text.find("; stack:\n");
  const size_t to = text.find(": end of stack");
  if (from == std::string::npos || to == std::string::npos || to < from) return 0;
  int lines = 0;
  for (size_t i = from + 9; i < to; ++i) lines += text[i] == '\n';
  return lines;
}

int* volatile g_nowhere = nullptr;  // volatile: the compiler cannot see that it is null

__attribute__((noinline)) void Fault() { *g_nowhere = 1; }

// Recurses until the stack is gone (a limit it never reaches keeps the compiler quiet).
__attribute__((noinline)) int Recurse(int depth) {
  volatile char pad[4096];
  pad[0] = static_cast<char>(depth);
  if (depth > (1 << 30)) return pad[0];
  return Recurse(depth + 1) + pad[0];
}

TEST(CrashHandlerTest, SegfaultPrintsItsStackAndDiesOfIt) {
  const Crash crash = RunChild([] { Fault(); });
  EXPECT_EQ(crash.signal, SIGSEGV) << crash.stderr_text;
  EXPECT_NE(crash.stderr_text.find("crash-child: fatal signal 11 (SIGSEGV) in thread "),
            std::string::npos)
      << crash.stderr_text;
  EXPECT_NE(crash.stderr_text.find(" at address 0x0; stack:"), std::string::npos)
      << crash.stderr_text;
  EXPECT_GE(StackLines(crash.stderr_text), 3) << crash.stderr_text;
}

TEST(CrashHandlerTest, AbortPrintsItsStackAndDiesOfIt) {
  const Crash crash = RunChild([] { std::abort(); });
  EXPECT_EQ(crash.signal, SIGABRT) << crash.stderr_text;
  EXPECT_NE(crash.stderr_text.find("fatal signal 6 (SIGABRT)"), std::string::npos)
      << crash.stderr_text;
  EXPECT_GE(StackLines(crash.stderr_text), 3) << crash.stderr_text;
}

TEST(CrashHandlerTest, MainThreadStackOverflowIsReported) {
  const Crash crash = RunChild([] { Recurse(0); });
  EXPECT_EQ(crash.signal, SIGSEGV) << crash.stderr_text.substr(0, 2000);
  EXPECT_NE(crash.stderr_text.find("fatal signal 11 (SIGSEGV)"), std::string::npos)
      << crash.stderr_text.substr(0, 2000);
  EXPECT_GE(StackLines(crash.stderr_text), 3) << crash.stderr_text.substr(0, 2000);
}

TEST(CrashHandlerTest, ArmedThreadStackOverflowIsReported) {
  const Crash crash = RunChild([] {
    std::thread t([] {
      ArmThreadForCrashReports();
      ArmThreadForCrashReports();  // a second call changes nothing
      Recurse(0);
    });
    t.join();
  });
  EXPECT_EQ(crash.signal, SIGSEGV) << crash.stderr_text.substr(0, 2000);
  EXPECT_NE(crash.stderr_text.find("fatal signal 11 (SIGSEGV)"), std::string::npos)
      << crash.stderr_text.substr(0, 2000);
  EXPECT_GE(StackLines(crash.stderr_text), 3) << crash.stderr_text.substr(0, 2000);
}

// Without its own signal stack a thread's overflow kills the process without a report: what
// ArmThreadForCrashReports is for.
TEST(CrashHandlerTest, UnarmedThreadStackOverflowDiesUnreported) {
  const Crash crash = RunChild([] {
    std::thread t([] { Recurse(0); });
    t.join();
  });
  EXPECT_EQ(crash.signal, SIGSEGV);
  EXPECT_EQ(crash.stderr_text.find("fatal signal"), std::string::npos) << crash.stderr_text;
}

TEST(CrashHandlerTest, ThreadPoolWorkersAreArmed) {
  const Crash crash = RunChild([] {
    ThreadPool pool(2);
    pool.Run([](int thread) {
      if (thread == 1) Recurse(0);
    });
  });
  EXPECT_EQ(crash.signal, SIGSEGV) << crash.stderr_text.substr(0, 2000);
  EXPECT_GE(StackLines(crash.stderr_text), 3) << crash.stderr_text.substr(0, 2000);
}

// Threads that come and go do not keep their signal stacks (each is unmapped at thread exit).
// Whether the page at `address` is mapped (mincore fails with ENOMEM on an unmapped range).
bool Mapped(void* address) {
  unsigned char resident = 0;
  return mincore(address, 1, &resident) == 0;
}

TEST(CrashHandlerTest, ArmedThreadsReleaseTheirStacks) {
  for (int i = 0; i < 20; ++i) {
    void* stack = nullptr;
    bool enabled = false;
    bool mapped_while_running = false;
    std::thread t([&] {
      ArmThreadForCrashReports();
      stack_t current{};
      sigaltstack(nullptr, &current);
      stack = current.ss_sp;
      enabled = (current.ss_flags & SS_DISABLE) == 0;
      mapped_while_running = stack != nullptr && Mapped(stack);
    });
    t.join();
    ASSERT_TRUE(enabled);
    ASSERT_TRUE(mapped_while_running);
    EXPECT_FALSE(Mapped(stack)) << "the signal stack of thread " << i << " outlived it";
  }
}

TEST(CrashHandlerTest, ServeReportsFatalSignalsInItsLog) {
  for (int sig : {SIGSEGV, SIGABRT}) {
    auto server = ServeProcess::Start({});
    ASSERT_NE(server, nullptr);
    auto client = server->Client();
    EXPECT_EQ(Get(*client, "/health").status, 200);
    const pid_t pid = server->pid();
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status));
    if (WIFSIGNALED(status)) {
      EXPECT_EQ(WTERMSIG(status), sig);
    }
    server->Forget();
    const std::string log = server->log();
    EXPECT_NE(log.find("kvserve serve: fatal signal " + std::to_string(sig)), std::string::npos)
        << log;
    EXPECT_NE(log.find(", sent by pid " + std::to_string(getpid())), std::string::npos) << log;
    EXPECT_GE(StackLines(log), 2) << log;
  }
}

}  // namespace
}  // namespace kvserve
