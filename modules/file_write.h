#pragma once
// Writing a file whole or not at all (safetensors and .npy files).
#include <string>
#include <utility>
#include <vector>

namespace td {

// Writes the pieces to path as a whole or not at all: into a new file beside it, flushed to disk,
// then renamed over it, so a full disk, a size limit or a crash leaves the old file as it was.
// A target that exists and is not a regular file (/dev/null, a pipe) is written in place.
// Failures are RuntimeErrors "[op] what 'path': reason".
void write_file_atomically(const char* op, const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& pieces);

}  // namespace td
