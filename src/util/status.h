// Errors at boundaries (files, flags, HTTP) travel as values: Status for "ok, or a code and a
// message", Result<T> for "a T, or a code and a message". Messages name the field and the bad
// value; callers that must tell errors apart (the server's HTTP status) read the code, never the
// message.
#pragma once

#include <cassert>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace kvserve {

enum class StatusCode : uint8_t {
  kOk,
  kInvalidArgument,     // bad input: a flag, a field, a malformed or hostile file
  kNotFound,            // a file, model, request or session that does not exist
  kResourceExhausted,   // a full queue or pool; retrying later can succeed
  kUnavailable,         // shutting down or still loading
  kFailedPrecondition,  // the state does not allow it (e.g. a corrupt invariant was found)
  kInternal,            // a bug
};
const char* StatusCodeName(StatusCode code);

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(StatusCode code, std::string message) {
    assert(code != StatusCode::kOk);
    return Status(code, std::move(message));
  }
  static Status InvalidArgument(std::string m) { return Error(StatusCode::kInvalidArgument, m); }
  static Status NotFound(std::string m) { return Error(StatusCode::kNotFound, std::move(m)); }
  static Status ResourceExhausted(std::string m) {
    return Error(StatusCode::kResourceExhausted, std::move(m));
  }
  static Status Unavailable(std::string m) { return Error(StatusCode::kUnavailable, std::move(m)); }
  static Status FailedPrecondition(std::string m) {
    return Error(StatusCode::kFailedPrecondition, std::move(m));
  }
  static Status Internal(std::string m) { return Error(StatusCode::kInternal, std::move(m)); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const Status& status() const { return *this; }
  const std::string& message() const { return message_; }

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "ok";
    case StatusCode::kInvalidArgument:
      return "invalid argument";
    case StatusCode::kNotFound:
      return "not found";
    case StatusCode::kResourceExhausted:
      return "resource exhausted";
    case StatusCode::kUnavailable:
      return "unavailable";
    case StatusCode::kFailedPrecondition:
      return "failed precondition";
    case StatusCode::kInternal:
      return "internal";
  }
  return "unknown";
}

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) { assert(!std::get<Status>(value_).ok()); }

  static Result InvalidArgument(std::string m) { return Result(Status::InvalidArgument(m)); }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const std::string& message() const { return std::get<Status>(value_).message(); }
  StatusCode code() const { return ok() ? StatusCode::kOk : std::get<Status>(value_).code(); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }

  T& value() & { return std::get<T>(value_); }
  const T& value() const& { return std::get<T>(value_); }
  T&& value() && { return std::get<T>(std::move(value_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> value_;
};

}  // namespace kvserve

// Propagates an error Status (or the error of a Result) out of the enclosing function.
#define KVSERVE_RETURN_IF_ERROR(expr)                           \
  do {                                                          \
    auto&& kvserve_status_ = (expr);                            \
    if (!kvserve_status_.ok()) return kvserve_status_.status(); \
  } while (0)
