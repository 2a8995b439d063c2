#pragma once
// Raw safetensors files for the loader's tests: bytes in and out of a path, and a file built
// from a JSON header and its data.
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>

namespace td::test {

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}
// n as 8 little-endian bytes: the header's length prefix
inline std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}
// A file from a header and raw data.
inline std::string file_of(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

}  // namespace td::test
