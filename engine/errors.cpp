#include "engine/errors.h"

namespace td {

namespace {
thread_local int g_per_set_naming = 0;
}

PerSetNaming::PerSetNaming() { ++g_per_set_naming; }
PerSetNaming::~PerSetNaming() { --g_per_set_naming; }
const char* shape_word() { return g_per_set_naming ? "per-set shape" : "shape"; }
const char* shapes_word() { return g_per_set_naming ? "per-set shapes" : "shapes"; }

std::string quote_key(std::string_view s, size_t max_bytes) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < max_bytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      if (c == '\'' || c == '\\') out += '\\';
      out += static_cast<char>(c);
    }
  }
  out += '\'';
  if (s.size() > max_bytes) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace td
