#pragma once
// A restricted unpickler: the opcodes of protocols 2 to 4 that plain data uses (ints, floats,
// strings, tuples, lists, dicts, None, bools) plus GLOBAL / REDUCE / BUILD / BINPERSID, which it
// never executes: the caller's hooks decide what an allowed global means and refuse the rest.
// Every other opcode is an error. Used for the data.pkl of PyTorch checkpoints.
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace td::detail {

struct PickleNode;

// One value on the unpickler's stack. Containers live in the PickleArena (shared through the
// memo, as in Python); Ext is a value the hooks made, identified by their own index.
struct PickleValue {
  enum class Kind { None, Bool, Int, BigInt, Float, String, Tuple, List, Dict, Global, Ext };
  Kind kind = Kind::None;
  int64_t i = 0;  // Bool, Int, Ext's index
  double f = 0;
  PickleNode* node = nullptr;  // String, Tuple, List, Dict, Global

  const std::string& str() const;                 // String, Global ("module name")
  const std::vector<PickleValue>& items() const;  // Tuple, List; Dict: key, value, key, ...
};

const char* kind_name(PickleValue::Kind k);

struct PickleNode {
  std::string text;
  std::vector<PickleValue> items;
  std::unordered_map<std::string, size_t> index;  // Dict: a str or int key -> its key's position
};

// Owns every container of one unpickling; destroyed flat, so cycles made through the memo cost
// nothing.
struct PickleArena {
  std::deque<PickleNode> nodes;
  PickleValue make(PickleValue::Kind kind);
};

struct PickleHooks {
  // GLOBAL module name: true to allow; false refuses it (a ValueError naming it).
  std::function<bool(const std::string& module, const std::string& name)> allow_global;
  // REDUCE: callable (an allowed Global) applied to args (a Tuple).
  std::function<PickleValue(const PickleValue& callable, const PickleValue& args)> reduce;
  // BUILD: state set on obj; BINPERSID: the object a persistent id names.
  std::function<void(const PickleValue& obj, const PickleValue& state)> build;
  std::function<PickleValue(const PickleValue& pid)> persistent_load;
};

// Runs the pickle in `bytes` to its STOP and returns the result. Errors are ValueErrors
// "<what>: <problem> at byte N"; limits: the memory budget, kMaxPickleDepth marks.
PickleValue read_pickle(std::string_view bytes, PickleArena& arena, const PickleHooks& hooks,
                        const std::string& what);

}  // namespace td::detail
