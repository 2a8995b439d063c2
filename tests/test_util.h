#pragma once
// Helpers shared by the test files: what an exception says.
#include <doctest/doctest.h>

#include <functional>
#include <string>

namespace td::test {

// The message of the exception f throws, or "" if it throws none.
inline std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// f must throw E with a message containing `what`.
template <class E, class F>
void check_throws_mentioning(F f, const std::string& what) {
  try {
    f();
    FAIL("expected an exception mentioning '" << what << "'");
  } catch (const E& e) {
    CHECK_MESSAGE(has(e.what(), what), std::string(e.what()));
  }
}

// f must throw E with a message naming the op as "[op]".
template <class E, class F>
void check_throws_naming_op(F f, const std::string& op) {
  check_throws_mentioning<E>(f, "[" + op + "]");
}

}  // namespace td::test
