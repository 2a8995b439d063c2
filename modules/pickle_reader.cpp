// The restricted unpickler (pickle_reader.h): a stack machine over the opcodes plain data needs.
// Every count it keeps (stack, marks, memo, nodes) grows by at most one per opcode byte, so the
// pickle's size bounds its memory; strings are checked against the bytes left before copying.
#include "modules/pickle_reader.h"

#include <cmath>
#include <cstring>

#include "engine/errors.h"
#include "engine/limits.h"

namespace td::detail {

namespace {
using Kind = PickleValue::Kind;
}

const std::string& PickleValue::str() const { return node->text; }
const std::vector<PickleValue>& PickleValue::items() const { return node->items; }

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
    case Kind::BigInt:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return "str";
    case Kind::Tuple:
      return "tuple";
    case Kind::List:
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Global:
      return "global";
    case Kind::Ext:
      return "object";
  }
  return "?";
}

PickleValue PickleArena::make(Kind kind) {
  nodes.emplace_back();
  PickleValue v;
  v.kind = kind;
  v.node = &nodes.back();
  return v;
}

PickleValue read_pickle(std::string_view bytes, PickleArena& arena, const PickleHooks& hooks,
                        const std::string& what) {
  size_t pos = 0, op_pos = 0;
  auto fail = [&](auto&&... msg) -> void {
    throw_error<ValueError>(what, ": ", msg..., " at byte ", op_pos);
  };
  std::vector<PickleValue> stack;
  std::vector<size_t> marks;
  std::unordered_map<uint64_t, PickleValue> memo;
  // What the objects cost beyond the pickle's own bytes (a byte of pickle may make a node, and a
  // memoized string may be copied into many dicts' indexes): checked against the memory budget.
  uint64_t index_bytes = 0;
  auto check_memory = [&] {
    const uint64_t bytes = arena.nodes.size() * (sizeof(PickleNode) + 16) +
                           (stack.size() + 2 * memo.size()) * sizeof(PickleValue) +
                           marks.size() * sizeof(size_t) + index_bytes;
    if (bytes > static_cast<uint64_t>(memory_budget()))
      fail("the unpickled objects need more than the memory budget of ", memory_budget(), " bytes");
  };
  auto need = [&](size_t n) {
    if (bytes.size() - pos < n) fail("the pickle is truncated");
  };
  auto u8 = [&] {
    need(1);
    return static_cast<uint8_t>(bytes[pos++]);
  };
  auto le = [&](size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(bytes[pos + k])} << (8 * k);
    pos += n;
    return v;
  };
  auto pop = [&] {
    if (stack.empty() || (!marks.empty() && stack.size() == marks.back())) fail("stack underflow");
    PickleValue v = stack.back();
    stack.pop_back();
    return v;
  };
  auto top = [&]() -> PickleValue& {
    if (stack.empty() || (!marks.empty() && stack.size() == marks.back())) fail("stack underflow");
    return stack.back();
  };
  // The values above the last MARK, and the mark removed.
  auto pop_mark = [&] {
    if (marks.empty()) fail("no MARK to pop to");
    std::vector<PickleValue> out(stack.begin() + static_cast<std::ptrdiff_t>(marks.back()),
                                 stack.end());
    stack.resize(marks.back());
    marks.pop_back();
    return out;
  };
  auto string_of = [&](size_t n) {
    need(n);
    PickleValue v = arena.make(Kind::String);
    v.node->text.assign(bytes.substr(pos, n));
    pos += n;
    return v;
  };
  auto tuple_of = [&](std::vector<PickleValue> items) {
    PickleValue v = arena.make(Kind::Tuple);
    v.node->items = std::move(items);
    return v;
  };
  auto set_item = [&](const PickleValue& dict, const PickleValue& key, const PickleValue& value) {
    if (dict.kind != Kind::Dict) fail("SETITEM on a ", kind_name(dict.kind), ", not a dict");
    std::string k;  // a key as Python compares it; other kinds are kept apart
    if (key.kind == Kind::String) {
      k = 's';
      k += key.str();
    } else if (key.kind == Kind::Int || key.kind == Kind::Bool) {
      k = 'i';  // appended, not "i" + ...: GCC 12 warns of a false -Wrestrict there
      k += std::to_string(key.i);
    }
    auto& items = dict.node->items;
    if (!k.empty()) {
      index_bytes += k.size() + 64;
      check_memory();
      const auto [it, fresh] = dict.node->index.emplace(std::move(k), items.size());
      if (!fresh) {  // a repeated key keeps its place and takes the new value, as in Python
        items[it->second + 1] = value;
        return;
      }
    }
    items.push_back(key);
    items.push_back(value);
  };
  auto append = [&](const PickleValue& list, const PickleValue& value) {
    if (list.kind != Kind::List) fail("APPEND to a ", kind_name(list.kind), ", not a list");
    list.node->items.push_back(value);
  };
  auto memo_put = [&](uint64_t index) { memo[index] = top(); };
  auto memo_get = [&](uint64_t index) {
    const auto found = memo.find(index);
    if (found == memo.end()) fail("memo index ", index, " was never stored");
    stack.push_back(found->second);
  };

  for (uint64_t ops = 1;; ++ops) {
    op_pos = pos;
    if (ops % 4096 == 0) check_memory();
    const uint8_t op = u8();
    switch (op) {
      case 0x80:  // PROTO
        if (u8() > 5) fail("unsupported pickle protocol");
        break;
      case 0x95:  // FRAME (protocol 4): a length hint, nothing to do
        le(8);
        break;
      case '.':  // STOP
        if (stack.size() != 1 || !marks.empty())
          fail("STOP with ", stack.size(), " values on the stack instead of 1");
        return stack.back();
      case '(':  // MARK
        marks.push_back(stack.size());
        break;
      case '}':  // EMPTY_DICT
        stack.push_back(arena.make(Kind::Dict));
        break;
      case ']':  // EMPTY_LIST
        stack.push_back(arena.make(Kind::List));
        break;
      case ')':  // EMPTY_TUPLE
        stack.push_back(arena.make(Kind::Tuple));
        break;
      case 'N':  // NONE
        stack.push_back(PickleValue{});
        break;
      case 0x88:    // NEWTRUE
      case 0x89: {  // NEWFALSE
        PickleValue v;
        v.kind = Kind::Bool;
        v.i = op == 0x88;
        stack.push_back(v);
        break;
      }
      case 'J':    // BININT
      case 'K':    // BININT1
      case 'M': {  // BININT2
        PickleValue v;
        v.kind = Kind::Int;
        v.i = op == 'J' ? static_cast<int32_t>(le(4)) : static_cast<int64_t>(le(op == 'K' ? 1 : 2));
        stack.push_back(v);
        break;
      }
      case 0x8a: {  // LONG1: n little-endian two's-complement bytes
        const size_t n = u8();
        need(n);
        PickleValue v;
        v.kind = Kind::Int;
        if (n > 8) {
          // beyond int64 unless it is a sign extension; td needs no such number
          v.kind = Kind::BigInt;
          for (size_t k = 8; k < n; ++k) {
            const uint8_t b = static_cast<uint8_t>(bytes[pos + k]);
            const uint8_t sign = (static_cast<uint8_t>(bytes[pos + 7]) & 0x80) ? 0xff : 0;
            if (b != sign) break;
            if (k + 1 == n) v.kind = Kind::Int;
          }
        }
        uint64_t u = 0;
        const size_t low = n < 8 ? n : 8;
        for (size_t k = 0; k < low; ++k)
          u |= uint64_t{static_cast<uint8_t>(bytes[pos + k])} << (8 * k);
        if (low > 0 && low < 8 && (static_cast<uint8_t>(bytes[pos + low - 1]) & 0x80))
          u |= ~uint64_t{0} << (8 * low);  // sign-extend
        v.i = static_cast<int64_t>(u);
        pos += n;
        stack.push_back(v);
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        need(8);
        uint64_t u = 0;
        for (size_t k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(bytes[pos + k]);
        pos += 8;
        PickleValue v;
        v.kind = Kind::Float;
        std::memcpy(&v.f, &u, 8);
        stack.push_back(v);
        break;
      }
      case 'X':  // BINUNICODE
        stack.push_back(string_of(le(4)));
        break;
      case 0x8c:  // SHORT_BINUNICODE (protocol 4)
        stack.push_back(string_of(u8()));
        break;
      case 't':  // TUPLE
        stack.push_back(tuple_of(pop_mark()));
        break;
      case 0x85:    // TUPLE1
      case 0x86:    // TUPLE2
      case 0x87: {  // TUPLE3
        std::vector<PickleValue> items(op - 0x84);
        for (size_t k = items.size(); k-- > 0;) items[k] = pop();
        stack.push_back(tuple_of(std::move(items)));
        break;
      }
      case 's': {  // SETITEM
        const PickleValue value = pop(), key = pop();
        set_item(top(), key, value);
        break;
      }
      case 'u': {  // SETITEMS
        const std::vector<PickleValue> kv = pop_mark();
        if (kv.size() % 2) fail("SETITEMS with an odd number of values");
        const PickleValue& dict = top();
        for (size_t k = 0; k < kv.size(); k += 2) set_item(dict, kv[k], kv[k + 1]);
        break;
      }
      case 'a': {  // APPEND
        const PickleValue value = pop();
        append(top(), value);
        break;
      }
      case 'e': {  // APPENDS
        const std::vector<PickleValue> values = pop_mark();
        const PickleValue& list = top();
        for (const auto& v : values) append(list, v);
        break;
      }
      case 'q':  // BINPUT
        memo_put(u8());
        break;
      case 'r':  // LONG_BINPUT
        memo_put(le(4));
        break;
      case 0x94:  // MEMOIZE (protocol 4)
        memo_put(memo.size());
        break;
      case 'h':  // BINGET
        memo_get(u8());
        break;
      case 'j':  // LONG_BINGET
        memo_get(le(4));
        break;
      case 'c':     // GLOBAL "module\nname\n"
      case 0x93: {  // STACK_GLOBAL (protocol 4)
        std::string module, name;
        if (op == 'c') {
          auto line = [&] {
            const size_t end = bytes.find('\n', pos);
            if (end == std::string_view::npos || end - pos > 1024)
              fail("GLOBAL without a name line");
            std::string s(bytes.substr(pos, end - pos));
            pos = end + 1;
            return s;
          };
          module = line();
          name = line();
        } else {
          const PickleValue n = pop(), m = pop();
          if (m.kind != Kind::String || n.kind != Kind::String)
            fail("STACK_GLOBAL of a ", kind_name(m.kind), " and a ", kind_name(n.kind));
          module = m.str().substr(0, 1024);
          name = n.str().substr(0, 1024);
        }
        if (!hooks.allow_global(module, name))
          fail("the pickle calls '", module, ".", name,
               "', which is not one of the names a state_dict needs; refused, never run");
        PickleValue g = arena.make(Kind::Global);
        g.node->text = module + " " + name;
        stack.push_back(g);
        break;
      }
      case 'R': {  // REDUCE
        const PickleValue args = pop(), callable = pop();
        if (callable.kind != Kind::Global || args.kind != Kind::Tuple)
          fail("REDUCE of a ", kind_name(callable.kind), " with a ", kind_name(args.kind),
               " (only an allowed global with a tuple)");
        stack.push_back(hooks.reduce(callable, args));
        break;
      }
      case 'b': {  // BUILD
        const PickleValue state = pop();
        hooks.build(top(), state);
        break;
      }
      case 'Q':  // BINPERSID
        stack.push_back(hooks.persistent_load(pop()));
        break;
      default: {
        static const char hex[] = "0123456789abcdef";
        const std::string code{'0', 'x', hex[op >> 4], hex[op & 15]};
        fail("opcode ", code, (op >= 0x20 && op < 0x7f) ? " ('" + std::string(1, op) + "')" : "",
             " is not one a state_dict pickle uses; refused");
      }
    }
  }
}

}  // namespace td::detail
