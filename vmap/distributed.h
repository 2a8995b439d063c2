#pragma once
// An ensemble's sets shared among MPI ranks: each rank computes one contiguous range of the sets
// (params.batch_size flattened; shard_sets) and the outputs are gathered, bit for bit those of
// one process: set i draws the same random numbers on whichever rank runs it. Built when CMake
// finds MPI (option TD_MPI); programs link td::mpi. No communication happens but the checks
// before the call and the final gather.
#include <mpi.h>

#include <functional>
#include <optional>

#include "modules/tensordict.h"
#include "modules/value.h"
#include "vmap/functional_vmap.h"

namespace td::dist {

// An MPI communicator. The default one is MPI_COMM_WORLD: it initialises MPI (threads:
// MPI_THREAD_FUNNELED, td's own threads never call MPI) unless the program already has, and then
// finalises it when the program exits. A program that runs MPI itself passes its communicator
// (MPI must be initialised) and finalises MPI itself.
class Communicator {
 public:
  Communicator();
  explicit Communicator(MPI_Comm comm);
  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }
  // The sets this rank owns among `sets` (shard_sets).
  SetRange shard(int64_t sets) const { return nn::shard_sets(sets, rank_, size_); }

 private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
};

// Where the outputs go: each rank keeps its own sets, or the whole outputs are gathered on the
// root rank (the others get None) or on every rank.
enum class Gather { None, Root, All };

struct ShardOptions {
  Gather gather = Gather::Root;
  int root = 0;
  // Set when params (and the in_dims inputs) hold only this rank's sets,
  // comm.shard(numel(batch_size)) flattened, as TensorDict::load_safetensors(path, range) reads
  // them: the whole ensemble's batch size. Unset: they hold every set, each rank computes its own.
  std::optional<Shape> batch_size = std::nullopt;
};

// nn::functional_vmap with the sets shared among the ranks: every rank calls it with the same
// module and options (a ValueError on every rank if their modules, params' keys and per-set
// shapes or options differ). Outputs: with Gather::None, the rank's own sets along one leading
// dim; else the whole outputs with params.batch_size as leading dims. Buffers (BatchNorm in
// training) are updated for each set on the rank that owns it, in that rank's params; gather them
// with gather_sets. An exception on any rank is raised on every rank, the same type with the same
// message, naming the rank (no rank is left waiting in a collective).
Value functional_vmap(const Communicator& comm, const nn::Module& module,
                      const nn::FunctionalVmapOptions& options, const ShardOptions& shard = {});

// The whole ensemble from each rank's shard (batch size [its sets], as shard() gives them), with
// batch size `batch_size`: on `root` (the others get an empty dict) or on every rank.
TensorDict gather_sets(const Communicator& comm, const TensorDict& shard, const Shape& batch_size,
                       Gather to = Gather::Root, int root = 0);

// Runs f on every rank, then agrees: an exception f raised on any rank is raised on every rank
// (the lowest failing rank's, same type and message). Every rank must call it.
void collectively(const Communicator& comm, const std::function<void()>& f);

}  // namespace td::dist
