#pragma once
// Reading only some sets of a tensor stored in C order in a file (the ranges of sets of
// load_safetensors, load_safetensors_input and load_npy_input): the bytes of sets [begin, end)
// of dims [dim, dim + ndims) are one run per index of the dims before dim.
#include <cstdint>
#include <istream>
#include <string>

#include "engine/shape.h"
#include "modules/tensordict.h"

namespace td::detail {

// Where the bytes of a range of sets lie in a tensor's data.
struct SetRuns {
  Shape shape;          // the result's: shape[:dim] + [sets.size()] + shape[dim + ndims:]
  int64_t count = 0;    // runs (none when the result is empty)
  uint64_t offset = 0;  // of the first run from the tensor's first byte
  uint64_t stride = 0;  // from a run's start to the next's
  uint64_t length = 0;  // bytes of a run
  uint64_t bytes() const { return static_cast<uint64_t>(count) * length; }
};

// A ValueError "<what>: ..." unless dim >= 0, ndims >= 1 and 0 <= begin <= end <= num_sets.
void check_set_args(const std::string& what, SetRange sets, int64_t num_sets, int64_t dim,
                    int64_t ndims);
// The runs of `sets` of a tensor of `shape` (elements of elem_bytes in the file) holding num_sets
// sets at dims [dim, dim + ndims); a ValueError "<what> of shape ...: ..." naming dim and the
// range when it has fewer dims or other than num_sets sets there. Arguments as check_set_args.
SetRuns set_runs(const Shape& shape, uint64_t elem_bytes, SetRange sets, int64_t num_sets,
                 int64_t dim, int64_t ndims, const std::string& what);
// Reads the runs of a tensor whose data starts at byte `data_offset` of f into dst
// (runs.bytes() bytes); false when the file ends first.
bool read_set_runs(std::istream& f, uint64_t data_offset, const SetRuns& runs, char* dst);

}  // namespace td::detail
