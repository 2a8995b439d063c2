#include "vmap/dims.h"

#include <ostream>
#include <sstream>

#include "engine/errors.h"

namespace td {

Dims::Dims(std::vector<Dims> list)
    : kind_(Kind::List), list_(std::make_shared<const std::vector<Dims>>(std::move(list))) {}

Dims::Dims(const std::vector<std::optional<int64_t>>& list) {
  if (!list.empty()) *this = Dims(std::vector<Dims>(list.begin(), list.end()));
}

Dims Dims::dict(DictEntries entries) {
  for (size_t i = 0; i < entries.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (entries[i].first == entries[j].first)
        throw_error<ValueError>("[Dims] dict names '", entries[i].first, "' twice");
  Dims d;
  d.kind_ = Kind::Dict;
  d.dict_ = std::make_shared<const DictEntries>(std::move(entries));
  return d;
}

const Dims* Dims::find(const std::string& key) const {
  if (kind_ != Kind::Dict) return nullptr;
  for (const auto& [k, d] : *dict_)
    if (k == key) return &d;
  return nullptr;
}

Dims Dims::mapped_at(int64_t dim) const {
  switch (kind_) {
    case Kind::Dim:
      return dim_ ? Dims(dim) : Dims(std::nullopt);
    case Kind::List: {
      std::vector<Dims> out;
      for (const auto& d : *list_) out.push_back(d.mapped_at(dim));
      return Dims(std::move(out));
    }
    case Kind::Dict: {
      DictEntries out;
      for (const auto& [k, d] : *dict_) out.emplace_back(k, d.mapped_at(dim));
      return dict(std::move(out));
    }
  }
  return *this;
}

std::ostream& operator<<(std::ostream& os, const Dims& d) {
  switch (d.kind()) {
    case Dims::Kind::Dim:
      if (d.dim()) return os << *d.dim();
      return os << "None";
    case Dims::Kind::List: {
      os << "(";
      for (size_t i = 0; i < d.list().size(); ++i) os << (i ? ", " : "") << d.list()[i];
      return os << (d.list().size() == 1 ? ",)" : ")");
    }
    case Dims::Kind::Dict: {
      os << "{";
      const char* sep = "";
      for (const auto& [k, x] : d.dict()) {
        os << sep << "'" << k << "': " << x;
        sep = ", ";
      }
      return os << "}";
    }
  }
  return os;
}

DimsList::operator std::vector<std::optional<int64_t>>() const {
  std::vector<std::optional<int64_t>> out;
  for (const Dims& d : *this) {
    if (!d.is_dim())
      throw_error<ValueError>("[Dims] in_dims entry ", d, " is nested: it is not one dim");
    out.push_back(d.dim());
  }
  return out;
}

DimsByKey::operator std::map<std::string, int64_t>() const {
  std::map<std::string, int64_t> out;
  for (const auto& [k, d] : *this) {
    if (!d.is_dim() || !d.dim())
      throw_error<ValueError>("[Dims] in_dims['", k, "'] = ", d, " is not one dim");
    out.emplace(k, *d.dim());
  }
  return out;
}

std::string DimsPath::str() const {
  auto entry = [&] { return key ? "'" + *key + "'" : std::to_string(index); };
  if (!parent) return std::string(label) + " " + entry();
  if (parent->children_are_roots) return std::string(parent->label) + " " + entry();
  return parent->str() + "[" + entry() + "]";
}

void throw_dims_mismatch(const Value& v, const Dims& d, const DimsPath& path) {
  const DimsPath* root = &path;
  while (root->parent) root = root->parent;
  std::ostringstream what;
  if (v.is_list()) {
    what << "a list of " << v.list().size();
  } else if (v.is_dict()) {
    what << "a dict with keys " << quoted_list(v.dict().keys());
  } else {
    what << "a " << v.kind_name();
  }
  throw_error<ValueError>(root->mismatch, ": ", path.str(), " is ", what.str(),
                          " but its dims are ", d,
                          "; a list or dict of dims must match it entry for entry");
}

}  // namespace td
