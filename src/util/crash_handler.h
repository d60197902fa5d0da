// Crash reports: on SIGSEGV, SIGBUS, SIGFPE, SIGILL or SIGABRT the process writes one line naming
// the signal and thread, then the stack of the thread that got it (glibc's backtrace, one frame a
// line: module(function+offset) [address]), to stderr, and dies of the same signal with its
// default action (so a core dump and the exit status are as without the handler).
//
//   InstallCrashHandler("kvserve serve");  // early in main, before threads start
//
// The handler uses only async-signal-safe calls, plus backtrace(), whose library is loaded at
// install time so that it does not allocate in the handler. The main thread gets an alternate
// signal stack, so its stack overflowing is reported too; another thread gets one when it calls
// ArmThreadForCrashReports (the engine loop, the thread pools' workers and the HTTP threads do),
// and a thread that did not dies of an overflow unreported (the signal has no stack to run on).
// Under AddressSanitizer or ThreadSanitizer nothing is installed: theirs report better.
#pragma once

namespace kvserve {

// `program` (borrowed, must live for ever: a string literal) starts the report's first line.
// Returns false if nothing was installed (sanitizer builds).
bool InstallCrashHandler(const char* program);

// Gives the calling thread its own alternate signal stack (once; later calls do nothing), freed
// when the thread exits, so that its stack overflowing is reported. Cheap; safe to call from any
// thread, before or without InstallCrashHandler.
void ArmThreadForCrashReports();

}  // namespace kvserve
