#include "modules/tensordict.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "engine/limits.h"
#include "engine/ops.h"

namespace td {

namespace {
bool has_prefix(const Shape& shape, const Shape& prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}
std::pair<std::string, std::string> split_first(const std::string& key) {
  auto dot = key.find('.');
  if (dot == std::string::npos) return {key, ""};
  return {key.substr(0, dot), key.substr(dot + 1)};
}
void check_key(const std::string& key) {
  if (key.empty() || key.front() == '.' || key.back() == '.' || key.find("..") != std::string::npos)
    throw_error<KeyError>("[TensorDict] invalid key ", quote_key(key));
  if (std::count(key.begin(), key.end(), '.') >= static_cast<std::ptrdiff_t>(kMaxKeyParts))
    throw_error<KeyError>("[TensorDict] key ", quote_key(key), " has more than ", kMaxKeyParts,
                          " dot-separated parts");
}
// The errors of a leaf that is undefined, or whose shape does not start with the batch size.
void check_defined(const std::string& key, const Tensor& value) {
  if (!value.defined())
    throw_error<ValueError>("[TensorDict] ", quote_key(key), " is an undefined tensor");
}
[[noreturn]] void throw_not_batched(const std::string& key, const Shape& shape,
                                    const Shape& batch) {
  throw_error<ValueError>("[TensorDict] ", quote_key(key), " has shape ", shape_str(shape),
                          ", which does not start with batch_size ", shape_str(batch));
}
}  // namespace

TensorDict::TensorDict(Shape batch_size) : batch_size_(std::move(batch_size)) {
  check_sizes("TensorDict", batch_size_);
}

TensorDict::TensorDict(std::initializer_list<std::pair<std::string, Tensor>> items,
                       Shape batch_size)
    : TensorDict(std::move(batch_size)) {
  for (const auto& [k, t] : items) set(k, t);
}

void TensorDict::set_batch_size(Shape batch_size) {
  check_sizes("TensorDict.set_batch_size", batch_size);
  for (auto& [k, e] : entries_) {
    if (auto* t = std::get_if<Tensor>(&e)) {
      if (!has_prefix(t->shape(), batch_size))
        throw_error<ValueError>("[TensorDict] batch_size ", shape_str(batch_size),
                                " does not match '", k, "' of shape ", shape_str(t->shape()));
    }
  }
  for (auto& [k, e] : entries_) {
    if (auto* d = std::get_if<TensorDict>(&e)) {
      if (!has_prefix(d->batch_size(), batch_size)) {
        try {
          d->set_batch_size(batch_size);
        } catch (const ValueError& err) {
          throw_error<ValueError>("[TensorDict] batch_size ", shape_str(batch_size),
                                  " does not match nested entry '", k, "': ", err.what());
        }
      }
    }
  }
  batch_size_ = std::move(batch_size);
}

void TensorDict::set(const std::string& key, Tensor value) {
  check_key(key);
  check_defined(key, value);
  auto [head, rest] = split_first(key);
  if (!rest.empty()) {
    for (auto& [k, e] : entries_) {
      if (k != head) continue;
      auto* d = std::get_if<TensorDict>(&e);
      if (!d)
        throw_error<KeyError>("[TensorDict] ", quote_key(head), " is a tensor, cannot set ",
                              quote_key(key));
      Shape shape = value.shape();
      try {
        d->set(rest, std::move(value));
      } catch (const ValueError&) {
        throw_not_batched(key, shape, d->batch_size());
      }
      return;
    }
    TensorDict sub(batch_size_);
    sub.set(rest, std::move(value));  // fails before insertion on a bad shape
    entries_.emplace_back(head, std::move(sub));
    return;
  }
  if (!has_prefix(value.shape(), batch_size_)) throw_not_batched(key, value.shape(), batch_size_);
  for (auto& [k, e] : entries_) {
    if (k == key) {
      e = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

void TensorDict::set(const std::string& key, TensorDict value) {
  check_key(key);
  auto [head, rest] = split_first(key);
  if (!rest.empty()) {
    for (auto& [k, e] : entries_) {
      if (k != head) continue;
      auto* d = std::get_if<TensorDict>(&e);
      if (!d)
        throw_error<KeyError>("[TensorDict] ", quote_key(head), " is a tensor, cannot set ",
                              quote_key(key));
      d->set(rest, std::move(value));
      return;
    }
    TensorDict sub(batch_size_);
    sub.set(rest, std::move(value));
    entries_.emplace_back(head, std::move(sub));
    return;
  }
  if (!has_prefix(value.batch_size(), batch_size_)) {
    try {
      value.set_batch_size(batch_size_);
    } catch (const ValueError& err) {
      throw_error<ValueError>("[TensorDict] nested entry ", quote_key(key), " with batch_size ",
                              shape_str(value.batch_size()), " does not match batch_size ",
                              shape_str(batch_size_), ": ", err.what());
    }
  }
  for (auto& [k, e] : entries_) {
    if (k == key) {
      e = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

namespace {
const TensorDict::Entry* find_entry(const TensorDict& d, const std::string& key) {
  auto [head, rest] = split_first(key);
  for (const auto& [k, e] : d.items()) {
    if (k != head) continue;
    if (rest.empty()) return &e;
    if (auto* sub = std::get_if<TensorDict>(&e)) return find_entry(*sub, rest);
    return nullptr;
  }
  return nullptr;
}
[[noreturn]] void missing(const TensorDict& d, const std::string& key) {
  throw_error<KeyError>("[TensorDict] key ", quote_key(key), " not found; keys are ",
                        quoted_list(d.keys(true, true)));
}
}  // namespace

Tensor TensorDict::get(const std::string& key) const {
  const Entry* e = find_entry(*this, key);
  if (!e) missing(*this, key);
  if (auto* t = std::get_if<Tensor>(e)) return *t;
  throw_error<TypeError>("[TensorDict] ", quote_key(key), " is a nested TensorDict, not a tensor");
}

const TensorDict& TensorDict::get_dict(const std::string& key) const {
  const Entry* e = find_entry(*this, key);
  if (!e) missing(*this, key);
  if (auto* d = std::get_if<TensorDict>(e)) return *d;
  throw_error<TypeError>("[TensorDict] ", quote_key(key), " is a tensor, not a nested TensorDict");
}

bool TensorDict::contains(const std::string& key) const { return find_entry(*this, key); }

bool TensorDict::erase(const std::string& key) {
  auto [head, rest] = split_first(key);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->first != head) continue;
    if (rest.empty()) {
      entries_.erase(it);
      return true;
    }
    if (auto* d = std::get_if<TensorDict>(&it->second)) return d->erase(rest);
    return false;
  }
  return false;
}

namespace {
// Calls f(dotted key, entry) for every entry of d and its nested dicts, in insertion order, with
// one growing prefix: linear in the keys' lengths however deep the nesting.
template <class F>
void walk_entries(const TensorDict& d, std::string& prefix, const F& f) {
  for (const auto& [k, e] : d.items()) {
    const size_t len = prefix.size();
    if (len) prefix += '.';
    prefix += k;
    f(prefix, e);
    if (const auto* sub = std::get_if<TensorDict>(&e)) walk_entries(*sub, prefix, f);
    prefix.resize(len);
  }
}
}  // namespace

std::vector<std::string> TensorDict::keys(bool include_nested, bool leaves_only) const {
  std::vector<std::string> out;
  if (!include_nested) {
    for (const auto& [k, e] : entries_)
      if (!leaves_only || std::holds_alternative<Tensor>(e)) out.push_back(k);
    return out;
  }
  std::string prefix;
  walk_entries(*this, prefix, [&](const std::string& key, const Entry& e) {
    if (!leaves_only || std::holds_alternative<Tensor>(e)) out.push_back(key);
  });
  return out;
}

std::vector<std::pair<std::string, Tensor>> TensorDict::leaves() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::string prefix;
  walk_entries(*this, prefix, [&](const std::string& key, const Entry& e) {
    if (const auto* t = std::get_if<Tensor>(&e)) out.emplace_back(key, *t);
  });
  return out;
}

// Rebuilds d's structure with f applied to every leaf and `batch` in place of d's batch size. A
// nested dict keeps the batch dims it has beyond its parent's (tensordict does), after the
// parent's new ones. The keys come from an existing TensorDict (valid and distinct), so only the
// shapes are checked: set()'s key parsing and search would cost more than the mapping of a small
// dict.
TensorDict TensorDict::map_dict(const TensorDict& d, const std::function<Tensor(const Tensor&)>& f,
                                const Shape& batch) {
  TensorDict out(batch);
  out.entries_.reserve(d.entries_.size());
  for (const auto& [k, e] : d.entries_) {
    if (const auto* t = std::get_if<Tensor>(&e)) {
      Tensor v = f(*t);
      check_defined(k, v);
      if (!has_prefix(v.shape(), batch)) throw_not_batched(k, v.shape(), batch);
      out.entries_.emplace_back(k, std::move(v));
    } else {
      const TensorDict& sub = std::get<TensorDict>(e);
      Shape sub_batch = batch;
      sub_batch.insert(sub_batch.end(), sub.batch_size_.begin() + d.batch_dims(),
                       sub.batch_size_.end());
      out.entries_.emplace_back(k, map_dict(sub, f, sub_batch));
    }
  }
  return out;
}

TensorDict TensorDict::operator[](int64_t i) const {
  if (batch_size_.empty())
    throw_error<ValueError>("[TensorDict] cannot index a TensorDict with batch_size []");
  int64_t n = batch_size_[0];
  if (i < -n || i >= n)
    throw_error<IndexError>("[TensorDict] index ", i, " is out of range for batch_size ",
                            shape_str(batch_size_));
  if (i < 0) i += n;
  Shape rest(batch_size_.begin() + 1, batch_size_.end());
  return map_dict(
      *this, [i](const Tensor& t) { return t.select(0, i); }, rest);
}

TensorDict TensorDict::slice(int64_t start, int64_t end, int64_t step) const {
  if (batch_size_.empty())
    throw_error<ValueError>("[TensorDict] cannot slice a TensorDict with batch_size []");
  if (step <= 0) throw_error<ValueError>("[TensorDict] slice step must be positive, got ", step);
  const SliceRange r = slice_range(batch_size_[0], start, end, step);
  Shape bs = batch_size_;
  bs[0] = r.length;
  return map_dict(
      *this, [r, step](const Tensor& t) { return t.slice(0, r.start, r.end, step); }, bs);
}

TensorDict TensorDict::stack(const std::vector<TensorDict>& dicts, int64_t dim) {
  if (dicts.empty()) throw_error<ValueError>("[TensorDict.stack] needs at least one TensorDict");
  const TensorDict& first = dicts[0];
  for (size_t i = 1; i < dicts.size(); ++i)
    if (dicts[i].batch_size() != first.batch_size())
      throw_error<ValueError>(
          "[TensorDict.stack] batch sizes differ: ", shape_str(first.batch_size()), " and ",
          shape_str(dicts[i].batch_size()), " (dict ", i, ")");
  int64_t d = normalize_insert_dim("TensorDict.stack", dim, first.batch_dims());
  auto k0 = first.keys(true, false);
  for (size_t i = 1; i < dicts.size(); ++i) {
    auto ki = dicts[i].keys(true, false);
    for (const auto& k : k0)
      if (!dicts[i].contains(k))
        throw_error<ValueError>("[TensorDict.stack] key '", k, "' is missing in dict ", i);
    for (const auto& k : ki)
      if (!first.contains(k))
        throw_error<ValueError>("[TensorDict.stack] dict ", i, " has an extra key '", k, "'");
  }
  // the new dim goes in at d of every batch size: a nested dict keeps its extra batch dims
  auto stacked = [&](Shape b) {
    b.insert(b.begin() + d, static_cast<int64_t>(dicts.size()));
    return b;
  };
  TensorDict out(stacked(first.batch_size()));
  for (const auto& k : first.keys(true, false)) {
    const Entry* e = find_entry(first, k);
    if (const auto* sub = std::get_if<TensorDict>(e)) {
      for (size_t i = 1; i < dicts.size(); ++i)
        if (const Shape& bi = dicts[i].get_dict(k).batch_size(); bi != sub->batch_size())
          throw_error<ValueError>("[TensorDict.stack] '", k, "' has batch_size ", shape_str(bi),
                                  " in dict ", i, " but ", shape_str(sub->batch_size()),
                                  " in dict 0");
      out.set(k, TensorDict(stacked(sub->batch_size())));
      continue;
    }
    std::vector<Tensor> ts;
    for (size_t i = 0; i < dicts.size(); ++i) {
      Tensor t = dicts[i].get(k);
      if (t.shape() != std::get<Tensor>(*e).shape())
        throw_error<ValueError>("[TensorDict.stack] '", k, "' has shape ", shape_str(t.shape()),
                                " in dict ", i, " but ", shape_str(std::get<Tensor>(*e).shape()),
                                " in dict 0");
      ts.push_back(t);
    }
    out.set(k, td::stack(ts, d));
  }
  return out;
}

TensorDict TensorDict::reshape(const Shape& batch_size) const {
  int64_t n = shape_numel(batch_size_);
  const Shape bs = infer_size("TensorDict.reshape", batch_size, n);
  size_t nb = batch_size_.size();
  return map_dict(
      *this,
      [&](const Tensor& t) {
        Shape s = bs;
        s.insert(s.end(), t.shape().begin() + nb, t.shape().end());
        return t.reshape(s);
      },
      bs);
}

TensorDict TensorDict::flatten_batch() const { return reshape({shape_numel(batch_size_)}); }

TensorDict TensorDict::apply(const std::function<Tensor(const Tensor&)>& f) const {
  return map_dict(*this, f, batch_size_);
}
TensorDict TensorDict::apply(const std::function<Tensor(const Tensor&)>& f,
                             Shape new_batch_size) const {
  return map_dict(*this, f, new_batch_size);
}

TensorDict TensorDict::clone() const {
  return apply([](const Tensor& t) { return t.clone(); });
}

// ---- printing ----

namespace {
void print_dict(std::ostream& os, const TensorDict& d, int indent) {
  std::string pad(indent + 4, ' '), pad2(indent + 8, ' ');
  // tensordict sorts the fields' lines (key first), not the keys' insertion order
  std::vector<std::string> fields;
  for (const auto& [k, e] : d.items()) {
    std::ostringstream f;
    f << pad2 << k << ": ";
    if (const auto* t = std::get_if<Tensor>(&e)) {
      f << "Tensor(shape=" << t->shape() << ", dtype=td." << dtype_name(t->dtype()) << ")";
    } else {
      print_dict(f, std::get<TensorDict>(e), indent + 8);
    }
    fields.push_back(f.str());
  }
  std::sort(fields.begin(), fields.end());
  os << "TensorDict(\n" << pad << "fields={";
  for (size_t i = 0; i < fields.size(); ++i) os << (i ? ",\n" : "\n") << fields[i];
  os << "},\n" << pad << "batch_size=" << d.batch_size() << ")";
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const TensorDict& d) {
  print_dict(os, d, 0);
  return os;
}

}  // namespace td
