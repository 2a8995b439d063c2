#pragma once
// Sequential: children "0", "1", ... whose forwards are chained; ModuleList: the children alone;
// ModuleDict: children by key.
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
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

// Children by key in insertion order and no forward, as torch.nn.ModuleDict: parameters are
// named "<key>.<name>". A key is a module name (ValueError for an empty one, one with a dot, or
// one already there: td does not replace a child).
class ModuleDict : public Module {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(ModuleDict); }
  ModuleDict() = default;
  explicit ModuleDict(
      const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& modules);
  void insert(const std::string& key, std::shared_ptr<Module> m);
  const std::shared_ptr<Module>& operator[](const std::string& key) const;  // KeyError
  bool contains(const std::string& key) const;
  std::vector<std::string> keys() const;
  size_t size() const { return modules_.size(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> modules_;
};

}  // namespace td::nn
