#include "modules/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "modules/tensordict.h"

namespace td {

// ---- ValueDict ----

ValueDict::ValueDict(std::initializer_list<std::pair<std::string, Value>> items) {
  for (const auto& [k, v] : items) set(k, v);
}

size_t ValueDict::size() const { return items_.size(); }
bool ValueDict::empty() const { return items_.empty(); }

bool ValueDict::contains(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return true;
  return false;
}

const Value& ValueDict::at(const std::string& key) const {
  for (const auto& kv : items_)
    if (kv.first == key) return kv.second;
  throw_error<KeyError>("[ValueDict] key '", key, "' not found; keys are ", quoted_list(keys()));
}

Value& ValueDict::operator[](const std::string& key) {
  for (auto& kv : items_)
    if (kv.first == key) return kv.second;
  items_.emplace_back(key, Value());
  return items_.back().second;
}

void ValueDict::set(const std::string& key, Value v) { (*this)[key] = std::move(v); }

bool ValueDict::erase(const std::string& key) {
  for (auto it = items_.begin(); it != items_.end(); ++it) {
    if (it->first == key) {
      items_.erase(it);
      return true;
    }
  }
  return false;
}

std::vector<std::string> ValueDict::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : items_) out.push_back(kv.first);
  return out;
}

// ---- Value ----

Value::Value(TensorDict td) : v_(std::make_shared<TensorDict>(std::move(td))) {}

void Value::throw_int_overflow(uint64_t v) {
  throw_error<ValueError>("[Value] integer ", v, " does not fit an int (int64)");
}

const char* Value::kind_name() const {
  static const char* names[] = {"None",   "bool",       "int",  "float", "str",
                                "Tensor", "TensorDict", "list", "dict"};
  return names[v_.index()];
}

namespace {
[[noreturn]] void wrong_kind(const Value& v, const char* wanted) {
  throw_error<TypeError>("[Value] expected ", wanted, " but the value holds ", v.kind_name());
}
}  // namespace

bool Value::to_bool() const {
  if (kind() != Kind::Bool) wrong_kind(*this, "bool");
  return std::get<bool>(v_);
}
int64_t Value::to_int() const {
  if (kind() != Kind::Int) wrong_kind(*this, "int");
  return std::get<int64_t>(v_);
}
double Value::to_double() const {
  if (kind() == Kind::Int) return static_cast<double>(std::get<int64_t>(v_));
  if (kind() != Kind::Double) wrong_kind(*this, "float");
  return std::get<double>(v_);
}
const std::string& Value::str() const {
  if (kind() != Kind::String) wrong_kind(*this, "str");
  return std::get<std::string>(v_);
}
const Tensor& Value::tensor() const {
  if (kind() != Kind::Tensor) wrong_kind(*this, "Tensor");
  return std::get<Tensor>(v_);
}
const TensorDict& Value::tensordict() const {
  if (kind() != Kind::TensorDict) wrong_kind(*this, "TensorDict");
  return *std::get<std::shared_ptr<TensorDict>>(v_);
}
const ValueList& Value::list() const {
  if (kind() != Kind::List) wrong_kind(*this, "list");
  return *std::get<std::shared_ptr<ValueList>>(v_);
}
ValueList& Value::list() {
  if (kind() != Kind::List) wrong_kind(*this, "list");
  return *std::get<std::shared_ptr<ValueList>>(v_);
}
const ValueDict& Value::dict() const {
  if (kind() != Kind::Dict) wrong_kind(*this, "dict");
  return *std::get<std::shared_ptr<ValueDict>>(v_);
}
ValueDict& Value::dict() {
  if (kind() != Kind::Dict) wrong_kind(*this, "dict");
  return *std::get<std::shared_ptr<ValueDict>>(v_);
}

const Value& Value::operator[](size_t i) const {
  const ValueList& l = list();
  if (i >= l.size())
    throw_error<IndexError>("[Value] list index ", i, " out of range for a list of ", l.size());
  return l[i];
}
const Value& Value::operator[](const std::string& key) const { return dict().at(key); }

namespace {
thread_local int g_value_depth = 0;
}  // namespace

ValueDepthGuard::ValueDepthGuard() {
  if (g_value_depth >= kMaxDepth)
    throw_error<ValueError>("[Value] nested more than ", kMaxDepth,
                            " levels deep: does a list or dict hold itself?");
  ++g_value_depth;
}
ValueDepthGuard::~ValueDepthGuard() { --g_value_depth; }

std::string repr_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // the shortest digits that read back as d, then Python's layout: positional for exponents
  // -4..15 (with a '.0' if nothing follows the point), else d.ddde+XX with two digits at least
  char buf[64];
  const auto end = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific).ptr;
  const std::string sci(buf, end);  // "-1.2345e+02"
  const size_t e = sci.find('e');
  const bool neg = sci[0] == '-';
  std::string digits = sci.substr(neg, e - neg);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(e + 1));
  std::ostringstream out;
  if (neg) out << '-';
  if (exp < -4 || exp >= 16) {
    out << digits[0];
    if (digits.size() > 1) out << '.' << digits.substr(1);
    out << (exp < 0 ? "e-" : "e+") << std::setw(2) << std::setfill('0') << std::abs(exp);
  } else if (exp < 0) {
    out << "0." << std::string(-exp - 1, '0') << digits;
  } else {
    const auto point = static_cast<size_t>(exp) + 1;
    if (digits.size() <= point)
      out << digits << std::string(point - digits.size(), '0') << ".0";
    else
      out << digits.substr(0, point) << '.' << digits.substr(point);
  }
  return out.str();
}

namespace {
void print_str(std::ostream& os, const std::string& s) {
  // Python's repr: single quotes unless the string holds one and no double quote.
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  os << q;
  for (char c : s) {
    if (c == q || c == '\\')
      os << '\\' << c;
    else if (c == '\n')
      os << "\\n";
    else if (c == '\t')
      os << "\\t";
    else
      os << c;
  }
  os << q;
}

// Python's repr of a Value tree. A list or dict met again inside itself prints as [...] or
// {...}, as Python's repr.
struct Printer {
  std::ostream& os;
  std::vector<const void*> printing;  // the lists and dicts being printed, innermost last

  void leaf(const Value& v) {
    switch (v.kind()) {
      case Value::Kind::None:
        os << "None";
        break;
      case Value::Kind::Bool:
        os << (v.to_bool() ? "True" : "False");
        break;
      case Value::Kind::Int:
        os << v.to_int();
        break;
      case Value::Kind::Double:
        os << repr_double(v.to_double());
        break;
      case Value::Kind::String:
        print_str(os, v.str());
        break;
      case Value::Kind::Tensor:
        os << v.tensor();
        break;
      default:  // a TensorDict (lists and dicts are containers)
        os << v.tensordict();
        break;
    }
  }
  template <class Walk>
  void container(const Value& v, const Walk& children) {
    const void* p = v.is_list() ? static_cast<const void*>(&v.list()) : &v.dict();
    if (std::find(printing.begin(), printing.end(), p) != printing.end()) {
      os << (v.is_list() ? "[...]" : "{...}");
      return;
    }
    printing.push_back(p);
    os << (v.is_list() ? "[" : "{");
    children();
    os << (v.is_list() ? "]" : "}");
    printing.pop_back();
  }
  template <class Walk>
  void child(const Value&, size_t i, const std::string* key, const Walk& walk) {
    if (i) os << ", ";
    if (key) {
      print_str(os, *key);
      os << ": ";
    }
    walk();
  }
};
}  // namespace

std::ostream& operator<<(std::ostream& os, const Value& v) {
  Printer printer{os, {}};
  walk_value(v, printer);
  return os;
}

namespace {
// Every Tensor leaf, TensorDicts' included, through f.
struct TensorMapper {
  const std::function<Tensor(const Tensor&)>& f;
  Value leaf(const Value& v) { return v.is_tensor() ? Value(f(v.tensor())) : v; }
  Value tensordict(const TensorDict& d) {
    // keep the batch size when every new leaf still has it, else fall back to []
    std::vector<std::pair<std::string, Tensor>> mapped;
    bool keep = true;
    for (auto& [k, t] : d.leaves()) {
      Tensor r = f(t);
      if (r.dim() < d.batch_dims() ||
          !std::equal(d.batch_size().begin(), d.batch_size().end(), r.shape().begin()))
        keep = false;
      mapped.emplace_back(k, std::move(r));
    }
    TensorDict out(keep ? d.batch_size() : Shape{});
    for (auto& [k, t] : mapped) out.set(k, t);
    return Value(std::move(out));
  }
};
struct TensorVisitor {
  const std::function<void(const Tensor&)>& f;
  void leaf(const Value& v) {
    if (v.is_tensor()) f(v.tensor());
  }
  void tensordict(const TensorDict& d) {
    for (const auto& [k, t] : d.leaves()) f(t);
  }
};
}  // namespace

Value map_tensors(const Value& v, const std::function<Tensor(const Tensor&)>& f) {
  TensorMapper mapper{f};
  return walk_value(v, mapper);
}

void for_each_tensor(const Value& v, const std::function<void(const Tensor&)>& f) {
  TensorVisitor visitor{f};
  walk_value(v, visitor);
}

}  // namespace td
