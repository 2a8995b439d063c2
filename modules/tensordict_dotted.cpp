// TensorDict::from_dotted: nesting many dotted keys in time linear in their number.
#include <memory>
#include <string_view>
#include <unordered_map>

#include "modules/tensordict.h"

namespace td {

TensorDict TensorDict::from_dotted(std::vector<std::pair<std::string, Tensor>> leaves,
                                   const std::function<void(const std::string&)>& fail) {
  struct Node {
    TensorDict dict;
    std::unordered_map<std::string, size_t> index;  // entry name -> position
    std::vector<std::unique_ptr<Node>> children;    // by position; null for a tensor
  };
  Node root;
  for (auto& [key, t] : leaves) {
    Node* node = &root;
    size_t begin = 0;
    while (true) {
      const size_t dot = key.find('.', begin);
      const size_t end = dot == std::string::npos ? key.size() : dot;
      if (end == begin) fail("invalid key " + quote_key(key) + " (an empty part)");
      std::string part = key.substr(begin, end - begin);
      const auto found = node->index.find(part);
      if (dot == std::string::npos) {
        if (found != node->index.end())
          fail("key " + quote_key(key) + " is given twice or clashes with a nested entry");
        node->index.emplace(part, node->children.size());
        node->children.push_back(nullptr);
        node->dict.entries_.emplace_back(std::move(part), std::move(t));
        break;
      }
      if (found == node->index.end()) {
        node->index.emplace(part, node->children.size());
        node->children.push_back(std::make_unique<Node>());
        node->dict.entries_.emplace_back(std::move(part), TensorDict());
        node = node->children.back().get();
      } else {
        node = node->children[found->second].get();
        if (!node) fail("key " + quote_key(key) + " clashes with another entry, a tensor");
      }
      begin = dot + 1;
    }
  }
  // children into their parents, deepest first (the depth is bounded by kMaxKeyParts)
  const std::function<TensorDict(Node&)> assemble = [&](Node& node) {
    for (size_t i = 0; i < node.children.size(); ++i)
      if (node.children[i]) node.dict.entries_[i].second = assemble(*node.children[i]);
    return std::move(node.dict);
  };
  return assemble(root);
}

}  // namespace td
