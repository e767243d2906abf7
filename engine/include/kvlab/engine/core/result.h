// Result<T>: a value or an Error that names the input and what was wrong.
// Library code never aborts or exits; every fallible entry point returns one of these.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace kvlab {

struct Error {
  std::string message;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : m_state(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : m_state(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(m_state); }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<T>(m_state); }
  const T& value() const& { return std::get<T>(m_state); }
  T&& value() && { return std::get<T>(std::move(m_state)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const { return std::get<Error>(m_state); }
  const std::string& message() const { return error().message; }

 private:
  std::variant<T, Error> m_state;
};

struct Ok {};
using Status = Result<Ok>;

inline Error make_error(std::string message) {
  return Error{std::move(message)};
}

// Passes a failure on: `KVLAB_TRY(expr);` returns the Error of `expr` (a Status, or a Result
// whose value is not needed) from the enclosing function, which returns any Result.
#define KVLAB_TRY(expr)                                                   \
  do {                                                                    \
    if (auto kvlab_try_result_ = (expr); !kvlab_try_result_) {            \
      return ::kvlab::Error{kvlab_try_result_.error()};                   \
    }                                                                     \
  } while (0)

}  // namespace kvlab
