#pragma once
// Scoring an ensemble: the losses `run --loss` and `bench --loss` name (torch.nn.functional's,
// with their default options), and a module that runs a model, then a loss of its output.
#include <memory>
#include <string>
#include <vector>

#include "modules/module.h"

namespace tdvmap {

using LossFn = td::Tensor (*)(const td::Tensor& output, const td::Tensor& target,
                              const std::string& reduction);

std::vector<std::string> loss_names();
LossFn loss_function(const std::string& name);  // ValueError for an unknown name
// Whether the loss's target holds class indices (cross_entropy, nll_loss) rather than values of
// the output's shape.
bool loss_takes_indices(const std::string& name);

// forward(input, target) = loss(model(input), target); the model is the submodule "model".
class ScoredModel : public td::nn::Module {
 public:
  ScoredModel(std::shared_ptr<td::nn::Module> model, const std::string& loss,
              std::string reduction = "mean");
  td::Tensor forward(const td::Tensor& input, const td::Tensor& target);
  const std::type_info* concurrent_forward_class() const override;

 private:
  std::shared_ptr<td::nn::Module> model_;
  LossFn loss_;
  std::string reduction_;
};

}  // namespace tdvmap
