// Status and Expected<T>: the result types of every fallible mlk function.
//
// A Status is either OK or carries a Code and a message written for the user
// ("what is wrong, where, and how to fix it"). Codes map one-to-one onto exit
// codes (see exit_code()) and HTTP statuses. Broken internal invariants are
// not Statuses: they go through MLK_CHECK (below).
//
// How mlk ends, one route per kind (docs/cli.md, "Exit statuses"):
//   a user error      a Status with its code: exit 1, or 2 for bad usage
//   an internal error Status::Internal, an MLK_CHECK that fails, or an
//                     exception that escapes a command: exit 3, with the
//                     place and a request to report it; never abort()
//   in a request of `mlk serve` a failing MLK_CHECK throws InternalError
//                     instead (CheckThrows), answered 500 and logged with
//                     its cause; the server goes on
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
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
  // 0 success, 2 bad usage, 3 an internal error (kInternalErrorExit), 1
  // everything else the user can act on.
  int exit_code() const { return ok() ? 0 : code_ == Code::kUsage ? 2 : code_ == Code::kInternal ? 3 : 1; }

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
  Expected(Status status);  // NOLINT: implicit by design; not from an OK Status (MLK_CHECK)
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

// The exit status of every internal error: distinct from 1 (a bad program
// or input) and 2 (bad usage).
inline constexpr int kInternalErrorExit = 3;

// What a failed MLK_CHECK throws inside a CheckThrows scope; what() is
// "FILE:LINE: internal error: MESSAGE (CONDITION)".
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
inline thread_local int check_throws = 0;
}

// While one lives on this thread, a failed MLK_CHECK throws InternalError
// rather than ending the process: what a server's request handler holds
// (service::Api::handle), so that one bad request cannot end the server.
class CheckThrows {
 public:
  CheckThrows() { ++detail::check_throws; }
  ~CheckThrows() { --detail::check_throws; }
  CheckThrows(const CheckThrows&) = delete;
  CheckThrows& operator=(const CheckThrows&) = delete;
};

// A broken invariant at FILE:LINE: reported on stderr with the condition and
// a request to report the bug, then the process ends with kInternalErrorExit
// (std::_Exit: no destructors run on a state already known to be wrong);
// inside a CheckThrows scope, InternalError is thrown instead.
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const char* msg) {
  const std::string what = std::string(file) + ":" + std::to_string(line) + ": internal error: " + msg + " (" + cond + ")";
  if (detail::check_throws > 0) throw InternalError(what);
  std::fprintf(stderr, "%s; please report this bug to the mlk maintainers\n", what.c_str());
  std::fflush(stderr);
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
  std::abort();  // a fuzzer's oracle: libFuzzer saves the input that crashed from its SIGABRT handler
#else
  std::_Exit(kInternalErrorExit);
#endif
}

template <typename T>
Expected<T>::Expected(Status status) : v_(std::move(status)) {
  if (std::get<Status>(v_).ok()) check_failed(__FILE__, __LINE__, "!status.ok()", "Expected built from an OK Status");
}

}  // namespace mlk

// Internal invariant: never for user mistakes (those are Statuses). See
// check_failed for what a failure does.
#define MLK_CHECK(cond, msg)                                          \
  do {                                                                \
    if (!(cond)) ::mlk::check_failed(__FILE__, __LINE__, #cond, msg); \
  } while (0)

#define MLK_RETURN_IF_ERROR(expr)        \
  do {                                   \
    ::mlk::Status _st = (expr);          \
    if (!_st.ok()) return _st;           \
  } while (0)
