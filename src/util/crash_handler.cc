#include "util/crash_handler.h"

#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVSERVE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define KVSERVE_SANITIZED 1
#endif
#endif

namespace kvserve {
namespace {

[[maybe_unused]] constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kMaxFrames = 64;
const char* g_program = "kvserve";
// The main thread's stack for the handler (unused in sanitized builds, which keep their own).
[[maybe_unused]] alignas(16) char g_alt_stack[64 * 1024];

// A thread's own alternate signal stack: mapped on first use, unmapped when the thread exits
// (after the signal stack is switched off, so no handler can be running on it).
class ThreadAltStack {
 public:
  static constexpr size_t kBytes = 64 * 1024;
  ThreadAltStack() {
    void* memory =
        mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return;
    stack_t stack{};
    stack.ss_sp = memory;
    stack.ss_size = kBytes;
    if (sigaltstack(&stack, nullptr) != 0) {
      munmap(memory, kBytes);
      return;
    }
    memory_ = memory;
  }
  ~ThreadAltStack() {
    if (memory_ == nullptr) return;
    stack_t off{};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    munmap(memory_, kBytes);
  }
  ThreadAltStack(const ThreadAltStack&) = delete;
  ThreadAltStack& operator=(const ThreadAltStack&) = delete;

 private:
  void* memory_ = nullptr;
};

void Write(const char* text) {
  size_t left = strlen(text);
  while (left > 0) {
    const ssize_t n = write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

// Decimal digits of `value` into `buffer` (at least 24 bytes); returns it.
const char* Decimal(long value, char* buffer) {
  char digits[24];
  int n = 0;
  const bool negative = value < 0;
  unsigned long u = negative ? 0ul - static_cast<unsigned long>(value) : value;
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u > 0 && n < 22);
  int at = 0;
  if (negative) buffer[at++] = '-';
  while (n > 0) buffer[at++] = digits[--n];
  buffer[at] = '\0';
  return buffer;
}

// "0x" and the hex digits of `value` into `buffer` (at least 24 bytes); returns it.
const char* Hex(uintptr_t value, char* buffer) {
  char digits[20];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[value & 15];
    value >>= 4;
  } while (value > 0 && n < 18);
  int at = 0;
  buffer[at++] = '0';
  buffer[at++] = 'x';
  while (n > 0) buffer[at++] = digits[--n];
  buffer[at] = '\0';
  return buffer;
}

const char* SignalName(int sig) {
  switch (sig) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGILL:
      return "SIGILL";
    case SIGABRT:
      return "SIGABRT";
    default:
      return "signal";
  }
}

void OnFatalSignal(int sig, siginfo_t* info, void*) {
  char number[24];
  Write(g_program);
  Write(": fatal signal ");
  Write(Decimal(sig, number));
  Write(" (");
  Write(SignalName(sig));
  Write(") in thread ");
  Write(Decimal(static_cast<long>(syscall(SYS_gettid)), number));
  if (info->si_code <= 0) {  // sent (kill, raise, abort): si_pid is set, si_addr is not
    Write(", sent by pid ");
    Write(Decimal(info->si_pid, number));
  } else if (sig == SIGSEGV || sig == SIGBUS) {
    Write(" at address ");
    Write(Hex(reinterpret_cast<uintptr_t>(info->si_addr), number));
  }
  Write("; stack:\n");
  void* frames[kMaxFrames];
  const int n = backtrace(frames, kMaxFrames);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  Write(g_program);
  Write(": end of stack\n");
  // SA_RESETHAND restored the default action; the signal is blocked in here, so it takes effect
  // on return (a fault re-executes its instruction and faults again).
  raise(sig);
}

}  // namespace

bool InstallCrashHandler(const char* program) {
#ifdef KVSERVE_SANITIZED
  (void)program;
  (void)&OnFatalSignal;
  return false;
#else
  g_program = program;
  // Loads libgcc's unwinder now: the first backtrace() may allocate.
  void* warm[2];
  backtrace(warm, 2);
  stack_t stack{};
  stack.ss_sp = g_alt_stack;
  stack.ss_size = sizeof(g_alt_stack);
  sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = OnFatalSignal;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : kSignals) sigaction(sig, &action, nullptr);
  return true;
#endif
}

void ArmThreadForCrashReports() {
#ifndef KVSERVE_SANITIZED
  // Once per thread (the HTTP workers call this per connection). The main thread has the static
  // stack already (InstallCrashHandler); others get their own.
  thread_local bool armed = false;
  if (armed) return;
  armed = true;
  if (syscall(SYS_gettid) == getpid()) return;
  thread_local ThreadAltStack stack;
  (void)stack;
#endif
}

}  // namespace kvserve
