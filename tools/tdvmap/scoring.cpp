#include "tools/tdvmap/scoring.h"

#include <map>

#include "engine/engine.h"

namespace tdvmap {
namespace {

using td::Tensor;
using R = const std::string&;

const std::map<std::string, LossFn>& losses() {
  static const std::map<std::string, LossFn> table = {
      {"mse_loss", [](const Tensor& y, const Tensor& t, R r) { return td::mse_loss(y, t, r); }},
      {"l1_loss", [](const Tensor& y, const Tensor& t, R r) { return td::l1_loss(y, t, r); }},
      {"smooth_l1_loss",
       [](const Tensor& y, const Tensor& t, R r) { return td::smooth_l1_loss(y, t, r); }},
      {"huber_loss",
       [](const Tensor& y, const Tensor& t, R r) { return td::huber_loss(y, t, r); }},
      {"cross_entropy",
       [](const Tensor& y, const Tensor& t, R r) { return td::cross_entropy(y, t, {}, -100, r); }},
      {"nll_loss",
       [](const Tensor& y, const Tensor& t, R r) { return td::nll_loss(y, t, {}, -100, r); }},
      {"binary_cross_entropy",
       [](const Tensor& y, const Tensor& t, R r) { return td::binary_cross_entropy(y, t, {}, r); }},
      {"binary_cross_entropy_with_logits",
       [](const Tensor& y, const Tensor& t, R r) {
         return td::binary_cross_entropy_with_logits(y, t, {}, r);
       }},
      {"kl_div", [](const Tensor& y, const Tensor& t, R r) { return td::kl_div(y, t, r); }},
  };
  return table;
}

}  // namespace

std::vector<std::string> loss_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : losses()) names.push_back(name);
  return names;
}

LossFn loss_function(const std::string& name) {
  auto it = losses().find(name);
  if (it == losses().end())
    td::throw_error<td::ValueError>("unknown loss ", td::quote_key(name));
  return it->second;
}

bool loss_takes_indices(const std::string& name) {
  return name == "cross_entropy" || name == "nll_loss";
}

ScoredModel::ScoredModel(std::shared_ptr<td::nn::Module> model, const std::string& loss,
                         std::string reduction)
    : model_(std::move(model)), loss_(loss_function(loss)), reduction_(std::move(reduction)) {
  register_module("model", model_);
  register_method("forward", &ScoredModel::forward, {"input", "target"});
}

td::Tensor ScoredModel::forward(const td::Tensor& input, const td::Tensor& target) {
  const td::Value out = (*model_)({input});
  return loss_((out.is_tensor() ? out : out[0]).tensor(), target, reduction_);
}

// safe to run on several threads when the model is
const std::type_info* ScoredModel::concurrent_forward_class() const {
  return model_->concurrent_forward_class() ? &typeid(ScoredModel) : nullptr;
}

}  // namespace tdvmap
