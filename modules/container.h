#pragma once
// Sequential: children "0", "1", ... whose forwards are chained; ModuleList: the children alone.
#include <initializer_list>
#include <memory>
#include <vector>

#include "modules/module.h"

namespace td::nn {

class Sequential : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(Sequential); }
  Sequential();
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  explicit Sequential(const std::vector<std::shared_ptr<Module>>& modules);
  // Appends a module as child str(size()).
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return modules_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;  // IndexError
  // Calls each child's forward on the previous result.
  Value forward(const Value& input);

 private:
  std::vector<std::shared_ptr<Module>> modules_;
};

// Children "0", "1", ... and no forward, as torch.nn.ModuleList (TransformerEncoder's layers).
class ModuleList : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(ModuleList); }
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

}  // namespace td::nn
