#include "modules/container.h"

#include <string>
#include <typeinfo>

#include "engine/ops.h"
#include "modules/activation.h"
#include "modules/conv.h"
#include "modules/linear.h"

namespace td::nn {

Sequential::Sequential() { register_method("forward", &Sequential::forward, {"input"}); }

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

Sequential::Sequential(const std::vector<std::shared_ptr<Module>>& modules) : Sequential() {
  for (const auto& m : modules) push_back(m);
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(modules_.size()), m);
  modules_.push_back(std::move(m));
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  if (i >= modules_.size())
    throw_error<IndexError>("[Sequential] index ", i, " is out of range for ", modules_.size(),
                            " modules");
  return modules_[i];
}

// A Linear or Conv2d followed by a ReLU (exactly those classes, not subclasses that may
// override forward) runs as one linear_relu or conv2d_relu: the ReLU is applied as the GEMM
// stores its output, saving a pass over the activations.
Value Sequential::forward(const Value& input) {
  Value v = input;
  for (size_t i = 0; i < modules_.size(); ++i) {
    Module& m = *modules_[i];
    const bool then_relu = i + 1 < modules_.size() && typeid(*modules_[i + 1]) == typeid(ReLU);
    if (then_relu && v.is_tensor() && typeid(m) == typeid(Linear)) {
      const auto& lin = static_cast<const Linear&>(m);
      v = linear_relu(v.tensor(), lin.weight, lin.bias);
      ++i;
      continue;
    }
    if (then_relu && v.is_tensor() && typeid(m) == typeid(Conv2d)) {
      v = static_cast<Conv2d&>(m).forward_relu(v.tensor());
      ++i;
      continue;
    }
    v = (*modules_[i])({v});
  }
  return v;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(size_++), std::move(m));
}

ModuleDict::ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
  for (const auto& [key, m] : modules) insert(key, m);
}

void ModuleDict::insert(const std::string& key, std::shared_ptr<Module> m) {
  register_module(key, m);  // refuses an empty, dotted or repeated key
  modules_.emplace_back(key, std::move(m));
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& key) const {
  for (const auto& [k, m] : modules_)
    if (k == key) return m;
  std::string known;
  for (const auto& [k, m] : modules_) known += (known.empty() ? "'" : ", '") + k + "'";
  throw_error<KeyError>("[ModuleDict] no module '", key, "' (keys: ", known.empty() ? "none" : known,
                        ")");
}

bool ModuleDict::contains(const std::string& key) const {
  for (const auto& [k, m] : modules_)
    if (k == key) return true;
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& [k, m] : modules_) out.push_back(k);
  return out;
}

}  // namespace td::nn
