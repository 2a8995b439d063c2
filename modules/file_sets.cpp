// Ranges of sets in a file's C-order tensors (file_sets.h).
#include "modules/file_sets.h"

#include <algorithm>

#include "engine/errors.h"

namespace td::detail {

namespace {
std::string sets_str(SetRange sets) {
  return "[" + std::to_string(sets.begin) + ", " + std::to_string(sets.end) + ")";
}
}  // namespace

void check_set_args(const std::string& what, SetRange sets, int64_t num_sets, int64_t dim,
                    int64_t ndims) {
  if (dim < 0 || ndims < 1)
    throw_error<ValueError>(what, ": the sets' dims [", dim, ", ", dim + ndims,
                            ") need dim >= 0 and ndims >= 1");
  if (num_sets < 0 || sets.begin < 0 || sets.begin > sets.end || sets.end > num_sets)
    throw_error<ValueError>(what, ": sets ", sets_str(sets), " are not a range within the ",
                            num_sets, " sets");
}

SetRuns set_runs(const Shape& shape, uint64_t elem_bytes, SetRange sets, int64_t num_sets,
                 int64_t dim, int64_t ndims, const std::string& what) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  auto fail = [&](auto&&... why) {
    throw_error<ValueError>(what, " of shape ", shape_str(shape), ": ", why..., " (sets ",
                            sets_str(sets), " at dims [", dim, ", ", dim + ndims, "))");
  };
  if (rank < dim + ndims) fail("fewer than ", dim + ndims, " dims");
  // the product of the sets' dims, which may overflow where another dim is 0
  int64_t held = 1;
  bool overflow = false;
  for (int64_t d = dim; d < dim + ndims; ++d)
    overflow = overflow || __builtin_mul_overflow(held, shape[d], &held);
  if (overflow || held != num_sets)
    fail("its dims hold ", overflow ? std::string("more than 2^63") : std::to_string(held),
         " sets, not ", num_sets);
  SetRuns r;
  r.shape.assign(shape.begin(), shape.begin() + dim);
  r.shape.push_back(sets.size());
  r.shape.insert(r.shape.end(), shape.begin() + dim + ndims, shape.end());
  if (std::find(shape.begin(), shape.end(), 0) != shape.end() || sets.size() == 0) return r;
  // no dim is 0: the products are bounded by the tensor's bytes, which the caller checked
  uint64_t outer = 1, set_bytes = elem_bytes;
  for (int64_t d = 0; d < dim; ++d) outer *= static_cast<uint64_t>(shape[d]);
  for (int64_t d = dim + ndims; d < rank; ++d) set_bytes *= static_cast<uint64_t>(shape[d]);
  r.stride = static_cast<uint64_t>(num_sets) * set_bytes;
  r.offset = static_cast<uint64_t>(sets.begin) * set_bytes;
  r.length = static_cast<uint64_t>(sets.size()) * set_bytes;
  r.count = static_cast<int64_t>(outer);
  if (sets.size() == num_sets) {  // all the sets: the runs touch, one read
    r.length *= outer;
    r.count = 1;
  }
  return r;
}

bool read_set_runs(std::istream& f, uint64_t data_offset, const SetRuns& runs, char* dst) {
  for (int64_t i = 0; i < runs.count; ++i) {
    f.clear();
    f.seekg(static_cast<std::streamoff>(data_offset + runs.offset + i * runs.stride));
    f.read(dst + i * runs.length, static_cast<std::streamsize>(runs.length));
    if (!f || static_cast<uint64_t>(f.gcount()) != runs.length) return false;
  }
  return true;
}

}  // namespace td::detail
