// The spec parser: a small recursive-descent parser over one line of text.
#include "tools/tdvmap/model_spec.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace tdvmap {

std::string spec_caret(const SpecError& e) {
  std::string line = e.spec();
  for (char& c : line)
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  return "  " + line + "\n  " + std::string(std::min(e.column(), line.size()), ' ') + "^\n";
}

namespace {

constexpr int kMaxDepth = 64;  // nesting limit, so a hostile spec cannot overflow the stack

class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  SpecCall parse() {
    skip_space();
    if (at_end()) fail("the model spec is empty; expected e.g. Linear(3, 1)");
    size_t col = pos_;
    std::string name = identifier();
    SpecCall call = call_after_name(std::move(name), col, 0);
    skip_space();
    if (!at_end()) fail("unexpected '" + std::string(1, peek()) + "' after the model");
    return call;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { fail_at(pos_, what); }
  [[noreturn]] void fail_at(size_t col, const std::string& what) {
    throw SpecError("bad model spec: " + what, text_, col);
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  void skip_space() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) {
      if (at_end()) fail(std::string("expected '") + c + "' but the spec ended");
      fail(std::string("expected '") + c + "' but found '" + peek() + "'");
    }
    ++pos_;
  }
  static bool ident_start(char c) {
    return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
  }
  static bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

  // A dotted identifier (nn.Linear); "torch." and "nn." prefixes are dropped.
  std::string identifier() {
    if (!ident_start(peek())) fail("expected a module name such as Linear");
    std::string name;
    while (true) {
      while (ident_char(peek())) name += text_[pos_++];
      if (peek() == '.' && pos_ + 1 < text_.size() && ident_start(text_[pos_ + 1])) {
        name += text_[pos_++];
        continue;
      }
      break;
    }
    for (const char* prefix : {"torch.", "nn."})
      if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
    return name;
  }

  SpecCall call_after_name(std::string name, size_t col, int depth) {
    if (depth > kMaxDepth) fail_at(col, "nested too deeply");
    SpecCall call;
    call.name = std::move(name);
    call.column = col;
    skip_space();
    if (peek() != '(') {
      if (at_end()) fail("expected '(' after " + call.name + " but the spec ended");
      fail("expected '(' after " + call.name);
    }
    ++pos_;
    skip_space();
    bool seen_keyword = false;
    while (peek() != ')') {
      if (at_end()) fail("expected ')' to close " + call.name + " but the spec ended");
      SpecArg arg;
      arg.column = pos_;
      // name=value?
      if (ident_start(peek())) {
        size_t save = pos_;
        std::string word;
        while (ident_char(peek())) word += text_[pos_++];
        skip_space();
        if (peek() == '=' && (pos_ + 1 >= text_.size() || text_[pos_ + 1] != '=')) {
          ++pos_;
          arg.name = word;
        } else {
          pos_ = save;
        }
      }
      if (arg.name.empty() && seen_keyword)
        fail_at(arg.column, "positional argument after a keyword argument");
      seen_keyword = seen_keyword || !arg.name.empty();
      for (const auto& other : call.args)
        if (!arg.name.empty() && other.name == arg.name)
          fail_at(arg.column, "argument '" + arg.name + "' given twice");
      skip_space();
      arg.value = value(depth + 1);
      call.args.push_back(std::move(arg));
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (peek() != ')') {
        if (at_end()) fail("expected ',' or ')' in " + call.name + " but the spec ended");
        fail("expected ',' or ')' in " + call.name);
      }
    }
    ++pos_;  // ')'
    return call;
  }

  SpecValue value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skip_space();
    SpecValue v;
    v.column = pos_;
    char c = peek();
    if (at_end()) fail("expected a value but the spec ended");
    if (c == '(' || c == '[') {
      const char close = c == '(' ? ')' : ']';
      ++pos_;
      v.kind = SpecValue::Kind::Tuple;
      skip_space();
      bool comma = false;
      while (peek() != close) {
        if (at_end()) fail(std::string("expected '") + close + "' but the spec ended");
        v.items.push_back(value(depth + 1));
        skip_space();
        comma = false;
        if (peek() == ',') {
          ++pos_;
          comma = true;
          skip_space();
        } else if (peek() != close) {
          fail(std::string("expected ',' or '") + close + "'");
        }
      }
      ++pos_;
      // (x) without a comma is just x, as in Python.
      if (close == ')' && v.items.size() == 1 && !comma) return v.items[0];
      return v;
    }
    if (c == '\'' || c == '"') {
      ++pos_;
      v.kind = SpecValue::Kind::String;
      while (peek() != c) {
        if (at_end()) fail_at(v.column, "unterminated string");
        v.s += text_[pos_++];
      }
      ++pos_;
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.')
      return number();
    if (ident_start(c)) {
      size_t col = pos_;
      std::string word = identifier();
      if (word == "True" || word == "False") {
        v.kind = SpecValue::Kind::Bool;
        v.b = word == "True";
        return v;
      }
      if (word == "None") return v;
      v.kind = SpecValue::Kind::Call;
      v.call = std::make_shared<SpecCall>(call_after_name(std::move(word), col, depth));
      return v;
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  SpecValue number() {
    SpecValue v;
    v.column = pos_;
    size_t start = pos_;
    if (peek() == '-' || peek() == '+') ++pos_;
    bool is_float = false;
    while (!at_end()) {
      char c = peek();
      if (std::isdigit(static_cast<unsigned char>(c))) {
        ++pos_;
      } else if (c == '.' || c == 'e' || c == 'E') {
        is_float = true;
        ++pos_;
        if ((c == 'e' || c == 'E') && (peek() == '-' || peek() == '+')) ++pos_;
      } else {
        break;
      }
    }
    std::string word = text_.substr(start, pos_ - start);
    if (ident_char(peek())) fail("bad number '" + word + peek() + "'");
    const char* b = word.c_str();
    char* e = nullptr;
    errno = 0;
    if (is_float) {
      v.kind = SpecValue::Kind::Float;
      v.f = std::strtod(b, &e);
    } else {
      v.kind = SpecValue::Kind::Int;
      v.i = std::strtoll(b, &e, 10);
    }
    if (e != b + word.size() || word == "-" || word == "+" || errno == ERANGE)
      fail_at(start, "bad number '" + word + "'");
    return v;
  }

  const std::string& text_;
  size_t pos_ = 0;
};

}  // namespace

SpecCall parse_model_spec(const std::string& spec) { return Parser(spec).parse(); }

}  // namespace tdvmap
