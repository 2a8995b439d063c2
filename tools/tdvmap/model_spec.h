#pragma once
// Model specs: a PyTorch-like constructor expression such as
//   Sequential(Linear(64, 256), ReLU(), Dropout(p=0.1), Linear(256, 10))
// parsed into a tree of calls, then built into td modules with PyTorch's constructor arguments
// (positional or name=value; ints, floats, True/False/None, 'strings', tuples like (3, 3)).
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace td::nn {
class Module;
}

namespace tdvmap {

// A spec that does not parse or does not build: exit status 2, shown with a caret.
class SpecError : public std::runtime_error {
 public:
  SpecError(const std::string& message, std::string spec, size_t column)
      : std::runtime_error(message + " (column " + std::to_string(column + 1) + ")"),
        spec_(std::move(spec)),
        column_(column) {}
  const std::string& spec() const { return spec_; }
  size_t column() const { return column_; }  // 0-based

 private:
  std::string spec_;
  size_t column_;
};

// "  <spec>\n  <spaces>^\n": the spec with a caret under the error's column.
std::string spec_caret(const SpecError& e);

struct SpecCall;

// One argument value of a spec.
struct SpecValue {
  enum class Kind { None, Bool, Int, Float, String, Tuple, Call };
  Kind kind = Kind::None;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<SpecValue> items;    // Tuple (also [a, b] lists)
  std::shared_ptr<SpecCall> call;  // Call: a nested module
  size_t column = 0;
};

struct SpecArg {
  std::string name;  // empty for a positional argument
  SpecValue value;
  size_t column = 0;
};

// Name(args...): a module constructor call.
struct SpecCall {
  std::string name;  // without an "nn." / "torch.nn." prefix
  std::vector<SpecArg> args;
  size_t column = 0;
};

// Parses a whole spec (SpecError pointing at the first bad character).
SpecCall parse_model_spec(const std::string& spec);

// Parses and builds the module (SpecError for unknown modules or bad arguments).
std::shared_ptr<td::nn::Module> build_model(const std::string& spec);

// The module names build_model knows.
std::vector<std::string> spec_module_names();

}  // namespace tdvmap
