#include "modules/container.h"

#include <string>

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

Value Sequential::forward(const Value& input) {
  Value v = input;
  for (const auto& m : modules_) v = (*m)({v});
  return v;
}

}  // namespace td::nn
