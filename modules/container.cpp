#include "modules/container.h"

#include <optional>
#include <string>
#include <typeinfo>

#include "engine/ops.h"
#include "modules/activation.h"
#include "modules/conv.h"
#include "modules/linear.h"
#include "modules/normalization.h"

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

namespace {
// relu(m(x)) in one pass, for the modules that apply a ReLU as they write their output (exactly
// those classes, not subclasses that may override forward); nullopt for the others.
std::optional<Tensor> forward_relu(Module& m, const Tensor& x) {
  const std::type_info& t = typeid(m);
  if (t == typeid(Linear)) {
    const auto& lin = static_cast<const Linear&>(m);
    return linear_relu(x, lin.weight, lin.bias);  // the ReLU as the GEMM stores
  }
  if (t == typeid(Conv2d)) return static_cast<Conv2d&>(m).forward_relu(x);
  if (t == typeid(BatchNorm1d) || t == typeid(BatchNorm2d))
    return static_cast<BatchNormBase&>(m).forward_relu(x);
  return std::nullopt;
}

// bn(conv(x)), with a ReLU if relu, in one op where conv is a Conv2d and bn a BatchNorm2d in eval
// mode with running statistics and the channels conv makes (so that it would not refuse the
// output); nullopt otherwise.
std::optional<Tensor> forward_conv_batch_norm(Module& conv, Module& bn, const Tensor& x,
                                              bool relu) {
  if (typeid(conv) != typeid(Conv2d) || typeid(bn) != typeid(BatchNorm2d) || x.dim() != 4)
    return std::nullopt;
  auto& c = static_cast<Conv2d&>(conv);
  const auto& b = static_cast<const BatchNorm2d&>(bn);
  if (b.is_training() || !b.track_running_stats || b.num_features != c.out_channels)
    return std::nullopt;
  return c.forward_batch_norm(x, b.running_mean, b.running_var, b.weight, b.bias, b.eps, relu);
}
}  // namespace

// A module followed by a ReLU runs as one pass where it can (forward_relu above), saving a pass
// over the activations; so does a Conv2d followed by an eval-mode BatchNorm2d (and a ReLU).
Value Sequential::forward(const Value& input) {
  Value v = input;
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (i + 1 < modules_.size() && v.is_tensor()) {
      const bool relu = i + 2 < modules_.size() && typeid(*modules_[i + 2]) == typeid(ReLU);
      if (auto y = forward_conv_batch_norm(*modules_[i], *modules_[i + 1], v.tensor(), relu)) {
        v = std::move(*y);
        i += relu ? 2 : 1;
        continue;
      }
    }
    if (i + 1 < modules_.size() && typeid(*modules_[i + 1]) == typeid(ReLU) && v.is_tensor()) {
      if (auto y = forward_relu(*modules_[i], v.tensor())) {
        v = std::move(*y);
        ++i;
        continue;
      }
    }
    v = (*modules_[i])({v});
  }
  return v;
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  register_module(std::to_string(size_++), std::move(m));
}

ModuleDict::ModuleDict(
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules) {
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
  throw_error<KeyError>("[ModuleDict] no module '", key,
                        "' (keys: ", known.empty() ? "none" : known, ")");
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
