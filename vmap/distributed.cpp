#include "vmap/distributed.h"

#include <climits>
#include <cstring>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include "engine/errors.h"
#include "engine/ops.h"

namespace td::dist {
namespace {

// Finalises MPI at exit when td initialised it (the program did not).
struct Finalizer {
  ~Finalizer() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
};

void init_mpi() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) throw_error<RuntimeError>("[dist::Communicator] MPI is already finalised");
    if (initialized) return;
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      throw_error<RuntimeError>("[dist::Communicator] MPI_Init_thread failed");
    static Finalizer finalizer;
  });
}

// An exception carried from one rank to all: its kind and message.
enum class Kind : int64_t { Runtime = 1, Value, Key, Index, Type };

[[noreturn]] void raise(Kind kind, const std::string& message) {
  switch (kind) {
    case Kind::Value:
      throw ValueError(message);
    case Kind::Key:
      throw KeyError(message);
    case Kind::Index:
      throw IndexError(message);
    case Kind::Type:
      throw TypeError(message);
    case Kind::Runtime:
      break;
  }
  throw RuntimeError(message);
}

// FNV-1a: the same on every rank whatever its standard library.
uint64_t fingerprint(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// Every rank's text, on every rank.
std::vector<std::string> allgather_text(const Communicator& c, const std::string& mine) {
  const int n = c.size();
  int len = static_cast<int>(std::min<size_t>(mine.size(), INT_MAX / 2 / std::max(n, 1)));
  std::vector<int> lens(n), displs(n);
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, c.comm());
  int total = 0;
  for (int r = 0; r < n; ++r) displs[r] = total, total += lens[r];
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR,
                 c.comm());
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(all.substr(displs[r], lens[r]));
  return out;
}

// Raises the same ValueError on every rank unless every rank's `description` is rank 0's,
// quoting the first line where they differ.
void check_same(const Communicator& c, const std::string& description, const char* op,
                const char* what) {
  const uint64_t mine = fingerprint(description);
  std::vector<uint64_t> all(static_cast<size_t>(c.size()));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, c.comm());
  int other = 0;
  for (int r = 1; r < c.size() && other == 0; ++r)
    if (all[r] != all[0]) other = r;
  if (other == 0) return;
  const std::vector<std::string> texts = allgather_text(c, description);
  std::istringstream a(texts[0]), b(texts[other]);
  std::string la, lb;
  while (true) {
    const bool more_a = static_cast<bool>(std::getline(a, la));
    const bool more_b = static_cast<bool>(std::getline(b, lb));
    if (!more_a) la = "(nothing)";
    if (!more_b) lb = "(nothing)";
    if (la != lb || (!more_a && !more_b)) break;
  }
  throw_error<ValueError>("[", op, "] the ranks were given different ", what, ": rank 0 has ",
                          quote_key(la, 200), " where rank ", other, " has ", quote_key(lb, 200));
}

// A tensor's dtype and its shape without its first set_dims dims (one set's).
std::string per_set(const Tensor& t, int64_t set_dims) {
  const Shape& sh = t.shape();
  return detail::cat_str(dtype_name(t.dtype()), " per set ",
                         Shape(sh.begin() + std::min<int64_t>(set_dims, t.dim()), sh.end()));
}

// A line per leaf of d: `prefix`, its key, dtype and per-set shape.
void describe_leaves(std::ostream& os, const char* prefix, const TensorDict& d, int64_t set_dims) {
  for (const auto& [key, t] : d.leaves())
    os << prefix << "'" << key << "' " << per_set(t, set_dims) << "\n";
}

// A ValueError unless a rank's shard of the ensemble (`what`: its params or its shard) has batch
// size [its sets].
void check_shard(const Communicator& c, const char* op, const char* what, const Shape& got,
                 const Shape& batch_size, SetRange mine) {
  if (got != Shape{mine.size()})
    throw_error<ValueError>("[", op, "] rank ", c.rank(), " of ", c.size(), " owns sets [",
                            mine.begin, ", ", mine.end, ") of batch_size ", batch_size, ": its ",
                            what, " must have batch_size [", mine.size(), "], got ", got);
}

// What every rank must agree on before the sets are shared out.
std::string describe_call(const nn::Module& module, const TensorDict& params, int64_t set_dims,
                          const Shape& batch_size, const nn::FunctionalVmapOptions& o,
                          const ShardOptions& s) {
  std::ostringstream os;
  os << "module " << module << "\n";
  for (const auto& [name, m] : const_cast<nn::Module&>(module).named_modules())
    os << "training '" << name << "' " << m->is_training() << "\n";
  describe_leaves(os, "params ", params, set_dims);
  os << "batch_size " << batch_size << "\n";
  os << "method " << o.method.value_or("forward") << "\n";
  os << "randomness " << static_cast<int>(o.randomness) << "\n";
  os << "loop " << o.loop << "\n";
  os << "in_dims";
  for (const auto& [key, dims] : o.in_dims) os << " '" << key << "'";
  os << "\n";
  os << "gather " << static_cast<int>(s.gather) << " root " << s.root << "\n";
  return os.str();
}

// The structure of a rank's outputs, and each tensor's dtype and per-set shape.
struct OutputSignature {
  std::ostringstream os;
  void leaf(const Value& v) {
    os << (v.is_tensor() ? "tensor " + per_set(v.tensor(), 1) : v.kind_name()) << "\n";
  }
  void tensordict(const TensorDict& d) {
    os << "TensorDict " << Shape(d.batch_size().begin() + 1, d.batch_size().end()) << "\n";
    describe_leaves(os, "  ", d, 1);
  }
  template <class Walk>
  void child(const Value&, size_t i, const std::string* key, const Walk& walk) {
    os << (key ? "key '" + *key + "'" : "item " + std::to_string(i)) << "\n";
    walk();
  }
};

// Sets along dim 0 of `local` (this rank's shard of `total` sets) gathered into one tensor of
// `total` sets on `root` or every rank (an undefined tensor elsewhere).
Tensor gather_leaf(const Communicator& c, const Tensor& local, int64_t total, Gather to, int root) {
  const bool receive = to == Gather::All || c.rank() == root;
  const Tensor t = local.contiguous();
  Shape whole = t.shape();
  whole[0] = total;
  const int64_t per_set = shape_numel(Shape(whole.begin() + 1, whole.end())) *
                          static_cast<int64_t>(dtype_size(t.dtype()));
  Tensor out;
  collectively(c, [&] {
    if (per_set > INT_MAX || total > INT_MAX)
      throw_error<ValueError>("[dist::gather] ", total, " sets of ", per_set,
                              " bytes each: MPI counts them in int, at most ", INT_MAX);
    if (receive) out = Tensor::empty(whole, t.dtype());
  });
  if (per_set == 0 || total == 0) return out;
  std::vector<int> counts(static_cast<size_t>(c.size())), displs(counts.size());
  for (int r = 0; r < c.size(); ++r) {
    const SetRange s = nn::shard_sets(total, r, c.size());
    counts[r] = static_cast<int>(s.size());
    displs[r] = static_cast<int>(s.begin);
  }
  MPI_Datatype set_type;
  MPI_Type_contiguous(static_cast<int>(per_set), MPI_BYTE, &set_type);
  MPI_Type_commit(&set_type);
  const int n = static_cast<int>(t.size(0));
  void* recv = receive ? out.raw_data() : nullptr;
  if (to == Gather::All)
    MPI_Allgatherv(t.raw_data(), n, set_type, recv, counts.data(), displs.data(), set_type,
                   c.comm());
  else
    MPI_Gatherv(t.raw_data(), n, set_type, recv, counts.data(), displs.data(), set_type, root,
                c.comm());
  MPI_Type_free(&set_type);
  return out;
}

// Gathers each rank's shard of a dict (batch size [its sets]) into the whole, batch_size leading.
TensorDict gather_dict(const Communicator& c, const TensorDict& shard, const Shape& batch_size,
                       Gather to, int root) {
  const bool receive = to == Gather::All || c.rank() == root;
  const int64_t total = shape_numel(batch_size);
  return shard.apply(
      [&](const Tensor& t) {
        Tensor whole = gather_leaf(c, t, total, to, root);
        return receive ? whole.unflatten(0, batch_size) : t;
      },
      receive ? batch_size : shard.batch_size());
}

// Rebuilds a rank's outputs with every tensor gathered.
struct OutputGather {
  const Communicator& c;
  const Shape& batch_size;
  Gather to;
  int root;
  Value leaf(const Value& v) {
    if (!v.is_tensor()) return v;
    Tensor whole = gather_leaf(c, v.tensor(), shape_numel(batch_size), to, root);
    return whole.defined() ? Value(whole.unflatten(0, batch_size)) : v;
  }
  Value tensordict(const TensorDict& d) {
    Shape bs = batch_size;
    bs.insert(bs.end(), d.batch_size().begin() + 1, d.batch_size().end());
    return Value(gather_dict(c, d, bs, to, root));
  }
};

void check_root(const Communicator& c, int root, const char* op) {
  if (root < 0 || root >= c.size())
    throw_error<ValueError>("[", op, "] root ", root, " is not a rank of ", c.size());
}

}  // namespace

Communicator::Communicator() : Communicator((init_mpi(), MPI_COMM_WORLD)) {}

Communicator::Communicator(MPI_Comm comm) : comm_(comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    throw_error<RuntimeError>(
        "[dist::Communicator] MPI is not initialised: call MPI_Init first, or use the default "
        "Communicator(), which does");
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void collectively(const Communicator& c, const std::function<void()>& f) {
  Kind kind = Kind::Runtime;
  std::string message;
  bool failed = true;
  try {
    f();
    failed = false;
  } catch (const KeyError& e) {
    kind = Kind::Key, message = e.what();
  } catch (const IndexError& e) {
    kind = Kind::Index, message = e.what();
  } catch (const ValueError& e) {
    kind = Kind::Value, message = e.what();
  } catch (const TypeError& e) {
    kind = Kind::Type, message = e.what();
  } catch (const std::bad_alloc&) {
    message = "out of memory";
  } catch (const std::exception& e) {
    message = e.what();
  } catch (...) {
    message = "unknown exception";
  }
  // the lowest failing rank's exception wins
  int flag = failed ? c.size() - c.rank() : 0, top = 0;
  MPI_Allreduce(&flag, &top, 1, MPI_INT, MPI_MAX, c.comm());
  if (top == 0) return;
  const int from = c.size() - top;
  int64_t head[2] = {static_cast<int64_t>(kind), static_cast<int64_t>(message.size())};
  MPI_Bcast(head, 2, MPI_INT64_T, from, c.comm());
  message.resize(static_cast<size_t>(std::min<int64_t>(head[1], INT_MAX)));
  MPI_Bcast(message.data(), static_cast<int>(message.size()), MPI_CHAR, from, c.comm());
  raise(static_cast<Kind>(head[0]),
        detail::cat_str(message, " (on rank ", from, " of ", c.size(), ")"));
}

Value functional_vmap(const Communicator& c, const nn::Module& module,
                      const nn::FunctionalVmapOptions& options, const ShardOptions& s) {
  constexpr const char* op = "dist::functional_vmap";
  const TensorDict& params = options.params;
  const bool sharded = s.batch_size.has_value();
  const Shape batch_size = sharded ? *s.batch_size : params.batch_size();
  const int64_t total = shape_numel(batch_size);
  const SetRange mine = c.shard(total);
  collectively(c, [&] {
    check_root(c, s.root, op);
    if (sharded) check_shard(c, op, "params", params.batch_size(), batch_size, mine);
    if (sharded && batch_size.empty())
      throw_error<ValueError>("[", op, "] ShardOptions::batch_size is [], which has no sets");
  });
  const int64_t set_dims = sharded ? 1 : params.batch_dims();
  check_same(c, describe_call(module, params, set_dims, batch_size, options, s), op,
             "modules, parameters or options");

  nn::FunctionalVmapOptions o = options;
  if (batch_size.empty()) {  // no sets to share: every rank makes the one call
    Value out;
    collectively(c, [&] { out = nn::functional_vmap(module, o); });
    return out;
  }
  if (sharded)
    o.first_set = options.first_set + mine.begin;
  else
    o.sets = mine;
  Value out;
  collectively(c, [&] { out = nn::functional_vmap(module, o); });
  if (s.gather == Gather::None) return out;
  OutputSignature signature;
  walk_value(out, signature);
  check_same(c, signature.os.str(), op, "outputs (structure, dtypes or per-set shapes)");
  OutputGather gather{c, batch_size, s.gather, s.root};
  Value whole = walk_value(out, gather);
  return s.gather == Gather::All || c.rank() == s.root ? whole : Value();
}

TensorDict gather_sets(const Communicator& c, const TensorDict& shard, const Shape& batch_size,
                       Gather to, int root) {
  constexpr const char* op = "dist::gather_sets";
  const SetRange mine = c.shard(shape_numel(batch_size));
  collectively(c, [&] {
    check_root(c, root, op);
    check_shard(c, op, "shard", shard.batch_size(), batch_size, mine);
  });
  std::ostringstream os;
  describe_leaves(os, "", shard, 1);
  os << "batch_size " << batch_size << " to " << static_cast<int>(to) << " root " << root << "\n";
  check_same(c, os.str(), op, "dicts or targets");
  TensorDict whole = gather_dict(c, shard, batch_size, to, root);
  return to == Gather::All || c.rank() == root ? whole : TensorDict();
}

}  // namespace td::dist
