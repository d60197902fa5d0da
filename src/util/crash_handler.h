// Crash reports: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the process writes one line naming
// the signal and thread, then the stack of the thread that got it (glibc's backtrace, one frame a
// line: module(function+offset) [address]), to stderr, and dies of the same signal with its
// default action (so a core dump and the exit status are as without the handler).
//
//   InstallCrashHandler("kvserve serve");  // early in main, before threads start
//
// The handler uses only async-signal-safe calls, plus backtrace(), whose library is loaded at
// install time so that it does not allocate in the handler. The main thread gets an alternate
// signal stack, so its stack overflowing is reported too; other threads' overflows die unreported
// (the signal has no stack to run on). Under AddressSanitizer or ThreadSanitizer nothing is
// installed: theirs report better.
#pragma once

namespace kvserve {

// `program` (borrowed, must live for ever: a string literal) starts the report's first line.
// Returns false if nothing was installed (sanitizer builds).
bool InstallCrashHandler(const char* program);

}  // namespace kvserve
