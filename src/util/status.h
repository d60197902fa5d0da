// Errors at boundaries (files, flags, HTTP) travel as values: Status for "ok or a message",
// Result<T> for "a T or a message". Messages name the field and the bad value.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace kvserve {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !message_.has_value(); }
  const Status& status() const { return *this; }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : value_(std::move(status)) { assert(!std::get<Status>(value_).ok()); }

  static Result Error(std::string message) { return Result(Status::Error(std::move(message))); }

  bool ok() const { return std::holds_alternative<T>(value_); }
  const std::string& message() const { return std::get<Status>(value_).message(); }
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
