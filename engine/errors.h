#pragma once
// td's exception types. Messages start with "[op]" and name the shapes involved.
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// operator<< for Shape must be visible where cat_str is defined: a std::vector<int64_t> argument
// prints through its conversion to Shape, which argument-dependent lookup would not find.
#include "engine/shape.h"

namespace td {

// The base every td error has besides its std one: `catch (const td::Error&)` takes them all.
struct Error {
  virtual ~Error() = default;
};
struct KeyError : std::out_of_range, Error {
  using std::out_of_range::out_of_range;
};
struct IndexError : std::out_of_range, Error {
  using std::out_of_range::out_of_range;
};
struct ValueError : std::invalid_argument, Error {
  using std::invalid_argument::invalid_argument;
};
struct TypeError : std::invalid_argument, Error {
  using std::invalid_argument::invalid_argument;
};
struct RuntimeError : std::runtime_error, Error {
  using std::runtime_error::runtime_error;
};
// An undefined tensor (an absent optional) used as a defined one; inside an op, the dispatcher
// rethrows it naming the op and its inputs.
struct UndefinedTensorError : RuntimeError {
  using RuntimeError::RuntimeError;
};
// An in-place write into a tensor whose elements share memory (expanded, stride 0), which
// functional_vmap names as the params entry every set shares.
struct ExpandedWriteError : RuntimeError {
  using RuntimeError::RuntimeError;
};

namespace detail {
template <class... Args>
std::string cat_str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

// throw_error<ValueError>("[add] shapes ", a, " and ", b, " do not broadcast")
template <class E, class... Args>
[[noreturn]] void throw_error(Args&&... args) {
  throw E(detail::cat_str(std::forward<Args>(args)...));
}

// The word an op's error uses for the shapes of its inputs: "shape" ("shapes"), or "per-set
// shape" while vmap runs an op that failed on stacked operands set by set, to raise the error of
// the set that fails (a PerSetNaming is alive on this thread).
const char* shape_word();
const char* shapes_word();
class PerSetNaming {
 public:
  PerSetNaming();
  ~PerSetNaming();
  PerSetNaming(const PerSetNaming&) = delete;
  PerSetNaming& operator=(const PerSetNaming&) = delete;
};

// s in single quotes for an error message: control bytes (a NUL would end the message) escaped
// as \xNN, a quote or backslash as \' or \\; a longer s is cut at max_bytes, then
// "... (N bytes)".
std::string quote_key(std::string_view s, size_t max_bytes = 100);

// Python's repr of a list of names, for messages: ['a', 'b', ... and 3 more] (at most `cap`).
inline std::string quoted_list(const std::vector<std::string>& names, size_t cap = 20) {
  std::string out = "[";
  for (size_t i = 0; i < names.size() && i < cap; ++i)
    out += (i ? ", " : "") + quote_key(names[i]);
  if (names.size() > cap) out += ", ... and " + std::to_string(names.size() - cap) + " more";
  return out + "]";
}

// The TypeError of an op with no bool kernel (torch's "not implemented for 'Bool'"):
// "[op] is not implemented for bool tensors (shape [2, 3])", "(shapes [2] and [1])" for two
// operands, then `hint`.
[[noreturn]] inline void throw_bool_not_implemented(const char* op,
                                                    std::initializer_list<Shape> shapes,
                                                    const char* hint = "") {
  std::ostringstream os;
  os << "[" << op << "] is not implemented for bool tensors (shape"
     << (shapes.size() > 1 ? "s" : "");
  const char* sep = " ";
  for (const Shape& s : shapes) {
    os << sep << s;
    sep = " and ";
  }
  os << ")" << hint;
  throw TypeError(os.str());
}

}  // namespace td
