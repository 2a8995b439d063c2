#pragma once
// nn::functional_vmap: calls a module once per set of stacked parameters, in one batched call.
// The C++ form of PyTorch tensordict's tensordict.nn.functional_vmap.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "engine/dispatch.h"
#include "modules/module.h"
#include "modules/tensordict.h"
#include "modules/value.h"
#include "vmap/dims.h"

namespace td::nn {

struct FunctionalVmapOptions {
  TensorDict params;      // stacked parameters and buffers, shaped like from_module(module)
  ValueList args = {};    // positional inputs, shared by every set
  ValueDict kwargs = {};  // keyword inputs
  // kwargs key -> the dim indexing the sets: one for every leaf of the input, or a list or dict
  // of dims (None = shared) following its structure (vmap/dims.h)
  DimsByKey in_dims = {};
  Randomness randomness = Randomness::Error;
  std::optional<int64_t> chunk_size = std::nullopt;  // sets computed at once
  std::optional<std::string> method = std::nullopt;  // a registered method instead of forward
  bool loop = false;  // call the sets one at a time (for modules vmap cannot handle)
  // Called with the sets done and the total after each chunk (each set with loop), one call at
  // a time: a long run's progress. An exception it throws ends the call as the module's would.
  std::function<void(int64_t done, int64_t total)> progress = {};
  // Only sets [begin, end) of params' batch dims flattened: a shard of the ensemble, the rest
  // computed elsewhere (another process: vmap/distributed.h). The outputs carry one leading dim
  // of end - begin sets, buffers change for those sets only, in_dims inputs give those sets.
  std::optional<SetRange> sets = std::nullopt;
  // params' set 0 is set first_set of a larger ensemble (params holds a shard of it): set i draws
  // the random numbers set first_set + i draws in the whole call.
  int64_t first_set = 0;
};

// Every Tensor leaf of the result has params.batch_size() as leading dims. Never mutates the
// module: parameters are substituted through a thread-local override. With stacked buffers in
// training mode (BatchNorm), each set updates its own slice of them in params. With more than one
// thread (set_num_threads) and no chunk_size, blocks of sets may run at once on the engine's
// threads where every module declares its forward safe for it (Module::concurrent_forward_class:
// td's modules do; any other module is called from the caller's thread only); the results are
// those of one thread.
Value functional_vmap(const Module& module, const FunctionalVmapOptions& options);

// The sets that rank `rank` of `ranks` computes among `sets`: contiguous ranges in rank order,
// sizes differing by at most one (the first sets % ranks ranks have one more); empty ranges for
// the ranks beyond the sets. ValueError unless 0 <= rank < ranks and sets >= 0.
SetRange shard_sets(int64_t sets, int64_t rank, int64_t ranks);

}  // namespace td::nn
