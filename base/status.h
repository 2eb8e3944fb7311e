// Status and Expected<T>: the result types of every fallible mlk function.
//
// A Status is either OK or carries a Code and a message written for the user
// ("what is wrong, where, and how to fix it"). Codes map one-to-one onto exit
// codes (see exit_code()) and, later, HTTP statuses. Broken internal invariants
// are not Statuses: they go through MLK_CHECK, which aborts with file:line.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace mlk {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad program, bad input file, bad value: exit 1
    kUsage,            // bad command line: exit 2
    kNotFound,
    kCorruption,
    kIOError,
    kUnsupported,
    kInternal,
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status Usage(std::string m) { return Status(Code::kUsage, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status IOError(std::string m) { return Status(Code::kIOError, std::move(m)); }
  static Status Unsupported(std::string m) { return Status(Code::kUnsupported, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // Process exit code for a CLI command that ends with this status:
  // 0 success, 2 bad usage, 1 everything else the user can act on.
  int exit_code() const { return ok() ? 0 : code_ == Code::kUsage ? 2 : 1; }

 private:
  Status(Code c, std::string m) : code_(c), message_(std::move(m)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                // NOLINT: implicit by design
  Expected(Status status) : v_(std::move(status)) {           // NOLINT
    if (std::get<Status>(v_).ok()) {
      std::fprintf(stderr, "internal error: Expected built from an OK Status\n");
      std::abort();
    }
  }
  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace mlk

// Internal invariant: aborts with file:line. Never for user mistakes.
#define MLK_CHECK(cond, msg)                                                              \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: internal error: %s (%s)\n", __FILE__, __LINE__, msg, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)

#define MLK_RETURN_IF_ERROR(expr)        \
  do {                                   \
    ::mlk::Status _st = (expr);          \
    if (!_st.ok()) return _st;           \
  } while (0)
