// functional_vmap against an independent reference: each set's parameters put into the module
// with to_module, the module called plainly, the results stacked.
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using nn::functional_vmap;
using td::test::message_of;

namespace {

std::shared_ptr<nn::Module> mlp(int64_t in, int64_t hidden, int64_t out, double p = 0) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(in, hidden));
  seq->push_back(std::make_shared<nn::ReLU>());
  if (p > 0) seq->push_back(std::make_shared<nn::Dropout>(p));
  seq->push_back(std::make_shared<nn::Linear>(hidden, out));
  return seq;
}

std::vector<std::shared_ptr<nn::Module>> ensemble(
    int n, std::function<std::shared_ptr<nn::Module>()> make) {
  std::vector<std::shared_ptr<nn::Module>> out;
  for (int i = 0; i < n; ++i) out.push_back(make());
  return out;
}

// Reference: set i computed alone, params put into the module by to_module.
Tensor loop_reference(nn::Module& m, const TensorDict& params, const ValueList& args,
                      const ValueDict& kwargs, const std::map<std::string, int64_t>& per_set) {
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < params.batch_size()[0]; ++i) {
    auto guard = params[i].to_module(m);
    ValueDict kw = kwargs;
    for (const auto& [k, d] : per_set) kw.set(k, kwargs.at(k).tensor().select(d, i));
    outs.push_back(m(args, kw).tensor());
  }
  return stack(outs, 0);
}

bool close(const Tensor& a, const Tensor& b, double rtol = 1e-6) {
  return a.shape() == b.shape() && allclose(a, b, rtol, 1e-6);
}

// functional_vmap(m, o) gives whole's bits with each chunk size and with loop = true.
void check_same_bits_chunked_and_looped(const nn::Module& m, const nn::FunctionalVmapOptions& o,
                                        const Tensor& whole, std::vector<int64_t> chunk_sizes) {
  for (int64_t c : chunk_sizes) {
    CAPTURE(c);
    auto chunked = o;
    chunked.chunk_size = c;
    CHECK(equal(functional_vmap(m, chunked).tensor(), whole));
  }
  auto looped = o;
  looped.loop = true;
  CHECK(equal(functional_vmap(m, looped).tensor(), whole));
}

// functional_vmap of m on a shared input x and on per-set inputs xs (the sets at dim set_dim):
// each equals the reference loop and gives its bits again chunked and looped.
void check_shared_and_per_set(nn::Module& m, const TensorDict& params, const Tensor& x,
                              const Tensor& xs, int64_t set_dim, std::vector<int64_t> chunks) {
  const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
  const nn::FunctionalVmapOptions per_set{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", set_dim}}};
  for (const auto& o : {shared, per_set}) {
    const Tensor whole = functional_vmap(m, o).tensor();
    CHECK(close(whole, loop_reference(m, params, o.args, o.kwargs, o.in_dims)));
    check_same_bits_chunked_and_looped(m, o, whole, chunks);
  }
}

}  // namespace

TEST_CASE("the reference page's examples") {
  manual_seed(0);
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 4; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 1));
  TensorDict params = TensorDict::from_modules(nets);
  CHECK(params.batch_size() == Shape{4});
  Tensor x = randn({10, 3});
  Value y = functional_vmap(*nets[0], {.params = params, .args = {x}});
  CHECK(y.tensor().shape() == Shape{4, 10, 1});
  // each set is its own Linear: y[i] = x @ w_i^T + b_i, checked by hand loops
  auto xv = x.to_vector<float>();
  auto yv = y.tensor().contiguous().to_vector<float>();
  for (int i = 0; i < 4; ++i) {
    auto w = params.get("weight")[i].contiguous().to_vector<float>();
    float b = params.get("bias")[i].item<float>();
    for (int n = 0; n < 10; ++n) {
      float acc = b;
      for (int k = 0; k < 3; ++k) acc += xv[n * 3 + k] * w[k];
      CHECK(yv[i * 10 + n] == doctest::Approx(acc).epsilon(1e-5));
    }
  }
  Tensor x_per_set = randn({4, 10, 3});
  Value z = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", x_per_set}}, .in_dims = {{"input", 0}}});
  CHECK(z.tensor().shape() == Shape{4, 10, 1});
  for (int i = 0; i < 4; ++i) CHECK(close(z.tensor()[i], (*nets[i])({x_per_set[i]}).tensor()));
}

TEST_CASE("MLP: shared and per-set inputs, in_dims 0, 1 and -1, chunks and loop") {
  manual_seed(1);
  const int B = 5;
  auto nets = ensemble(B, [] { return mlp(6, 16, 3); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({7, 6});
  Tensor ref_shared = loop_reference(m, params, {x}, {}, {});
  CHECK(close(functional_vmap(m, {.params = params, .args = {x}}).tensor(), ref_shared));
  for (int64_t c : {1, 3, B, B + 4})
    CHECK(close(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(),
                ref_shared));
  CHECK(close(functional_vmap(m, {.params = params, .args = {x}, .loop = true}).tensor(),
              ref_shared));

  Tensor xs0 = randn({B, 7, 6});
  Tensor xs1 = randn({7, B, 6});
  Tensor xsm = randn({7, 6, B});  // in_dims -1: the sets are the last dim
  struct Case {
    Tensor x;
    int64_t dim;
  };
  for (auto [xi, d] : {Case{xs0, 0}, Case{xs1, 1}, Case{xsm, -1}}) {
    int64_t pd = d < 0 ? d + xi.dim() : d;
    Tensor ref = loop_reference(m, params, {}, {{"input", xi}}, {{"input", pd}});
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                     std::optional<int64_t>{3}, std::optional<int64_t>{B}}) {
      Value out = functional_vmap(m, {.params = params,
                                      .kwargs = {{"input", xi}},
                                      .in_dims = {{"input", d}},
                                      .chunk_size = c});
      CHECK(close(out.tensor(), ref));
    }
    Value looped = functional_vmap(
        m, {.params = params, .kwargs = {{"input", xi}}, .in_dims = {{"input", d}}, .loop = true});
    CHECK(close(looped.tensor(), ref));
  }
}

TEST_CASE("two batch dims come back unflattened and equal a nested loop") {
  manual_seed(2);
  auto nets = ensemble(6, [] { return mlp(4, 8, 2); });
  TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  CHECK(params.batch_size() == Shape{2, 3});
  Tensor x = randn({2, 3, 5, 4});  // per set, batch dims at 0..1
  Value out = functional_vmap(
      *nets[0],
      {.params = params, .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}, .chunk_size = 4});
  REQUIRE(out.tensor().shape() == Shape{2, 3, 5, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(close(out.tensor()[i][j], (*nets[i * 3 + j])({x[i][j]}).tensor()));
  Tensor xs = randn({5, 2, 3, 4});  // batch dims at 1..2
  Value out2 = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(
          close(out2.tensor()[i][j], (*nets[i * 3 + j])({xs.select(1, i).select(1, j)}).tensor()));
}

TEST_CASE("an empty batch size calls the module once with params") {
  manual_seed(3);
  auto net = mlp(3, 4, 2);
  auto other = mlp(3, 4, 2);
  TensorDict params = TensorDict::from_module(*other);
  Tensor x = randn({5, 3});
  Value out = functional_vmap(*net, {.params = params, .args = {x}});
  CHECK(close(out.tensor(), (*other)({x}).tensor()));
}

TEST_CASE("a batch of size 0 gives empty outputs of the per-set shape") {
  auto nets = ensemble(2, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets).slice(0, 0);
  REQUIRE(params.batch_size() == Shape{0});
  Tensor x = randn({5, 3});
  for (bool loop : {false, true})
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
      Value out =
          functional_vmap(*nets[0], {.params = params, .args = {x}, .chunk_size = c, .loop = loop});
      CHECK(out.tensor().shape() == Shape{0, 5, 2});
    }
}

TEST_CASE("randomness: different is bit-identical across chunking and loop; same; error") {
  auto nets = ensemble(4, [] { return mlp(5, 32, 3, 0.5); });
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({6, 5});
  auto run = [&](Randomness r, std::optional<int64_t> c, bool loop) {
    manual_seed(42);
    return functional_vmap(
               *nets[0],
               {.params = params, .args = {x}, .randomness = r, .chunk_size = c, .loop = loop})
        .tensor();
  };
  Tensor base = run(Randomness::Different, std::nullopt, false);
  for (int64_t c : {1, 2, 3, 4}) CHECK(equal(run(Randomness::Different, c, false), base));
  CHECK(equal(run(Randomness::Different, std::nullopt, true), base));
  // loop with randomness "error" draws as "different" does
  CHECK(equal(run(Randomness::Error, std::nullopt, true), base));
  // the dropout masks differ between sets: set 0's output differs from what set 0's
  // parameters give under set 1's mask
  Tensor same = run(Randomness::Same, std::nullopt, false);
  for (int64_t c : {1, 3}) CHECK(equal(run(Randomness::Same, c, false), same));
  // with identical parameters in every set, "same" gives identical outputs and "different" not
  std::vector<std::shared_ptr<nn::Module>> clones(4, nets[0]);
  TensorDict shared = TensorDict::from_modules(clones);
  manual_seed(7);
  Tensor s =
      functional_vmap(*nets[0], {.params = shared, .args = {x}, .randomness = Randomness::Same})
          .tensor();
  manual_seed(7);
  Tensor d = functional_vmap(*nets[0],
                             {.params = shared, .args = {x}, .randomness = Randomness::Different})
                 .tensor();
  for (int i = 1; i < 4; ++i) {
    CHECK(equal(s[i], s[0]));
    CHECK_FALSE(equal(d[i], d[0]));
  }
  CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params, .args = {x}}), RuntimeError);
  // eval-mode dropout is not random
  for (auto& n : nets) n->eval();
  CHECK_NOTHROW(functional_vmap(*nets[0], {.params = params, .args = {x}}));
}

// Tanh's vector code and std::tanh differ in the last bits: the elements a call left to a
// scalar tail (15 a set here, a tail of 16-float vectors on AVX-512) moved with the chunk size.
TEST_CASE("Tanh and GELU give the same bits with any chunk_size, loop and input layout") {
  manual_seed(11);
  auto nets = ensemble(7, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 3), std::make_shared<nn::Tanh>(),
        std::make_shared<nn::Linear>(3, 3), std::make_shared<nn::GELU>()});
  });
  TensorDict params = TensorDict::from_modules(nets);
  // the per-set inputs with the sets at dim 1
  check_shared_and_per_set(*nets[0], params, randn({5, 4}), randn({5, 7, 4}), 1,
                           {1, 2, 3, 4, 5, 6, 7});
}

// A few input rows take dot products over the weights for any width (six rows from a depth of
// 64: the second layer here); the output columns of a set sit at other places in the shared
// input's single product than in a set's own.
TEST_CASE("a few input rows: the same bits with any chunk_size, loop and input layout") {
  manual_seed(12);
  auto nets = ensemble(6, [] { return mlp(37, 70, 10); });
  TensorDict params = TensorDict::from_modules(nets);
  for (int64_t rows : {1, 2, 6}) {
    CAPTURE(rows);
    check_shared_and_per_set(*nets[0], params, randn({rows, 37}), randn({6, rows, 37}), 0,
                             {1, 4, 5});
  }
}

// Its score products are small enough for Eigen's coefficient-based product, whose bits on
// AVX-512 depended on where a set's output sat in the chunk.
// vmap normalised and then applied the per-set weights in float32; a call alone applies them
// in the kernel, in double: the last bits differed from loop = true.
TEST_CASE("LayerNorm with per-set weights gives the bits of each set's call alone") {
  manual_seed(13);
  auto nets = ensemble(5, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::LayerNorm>(IntList{6})});
  });
  TensorDict params =
      TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
  Tensor x = randn({3, 4}), xs = randn({5, 3, 4});
  const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
  const nn::FunctionalVmapOptions per_set{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}};
  for (const auto& o : {shared, per_set}) {
    const Tensor whole = functional_vmap(*nets[0], o).tensor();
    check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 2, 3});
  }
}

// The same for BatchNorm on a shared input without running stats: only its affine weights are
// per set, and the rule applied them after the kernel, in float32.
TEST_CASE("BatchNorm with per-set weights on a shared input gives each set's bits") {
  manual_seed(14);
  auto nets = ensemble(4, [] {
    return std::make_shared<nn::Sequential>(std::vector<std::shared_ptr<nn::Module>>{
        std::make_shared<nn::BatchNorm1d>(5, 1e-5, 0.1, true, false),
        std::make_shared<nn::Linear>(5, 2)});
  });
  for (auto& n : nets) n->train();
  TensorDict params =
      TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
  const nn::FunctionalVmapOptions o{.params = params, .args = {randn({6, 5})}};
  const Tensor whole = functional_vmap(*nets[0], o).tensor();
  check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 3});
}

// Also one query (a set alone keeps a transposed operand that the batch copies).
TEST_CASE("MultiheadAttention gives the same bits with any chunk_size and loop") {
  manual_seed(12);
  for (auto [e, h, l] : {std::array<int64_t, 3>{6, 1, 5}, {28, 4, 1}}) {
    CAPTURE(e);
    auto nets = ensemble(
        7, [e, h] { return std::make_shared<nn::MultiheadAttention>(e, h, 0.0, true, true); });
    TensorDict params =
        TensorDict::from_modules(nets).apply([](const Tensor& t) { return randn(t.shape()); });
    Tensor q = randn({1, l, e}), k = randn({1, 4, e}), v = randn({1, 4, e});
    nn::FunctionalVmapOptions o{.params = params,
                                .kwargs = {{"query", q}, {"key", k}, {"value", v}}};
    const Tensor whole = functional_vmap(*nets[0], o).list().at(0).tensor();
    for (int64_t c = 1; c <= 7; ++c) {
      CAPTURE(c);
      o.chunk_size = c;
      CHECK(equal(functional_vmap(*nets[0], o).list().at(0).tensor(), whole));
    }
    o.chunk_size = std::nullopt;
    o.loop = true;
    CHECK(equal(functional_vmap(*nets[0], o).list().at(0).tensor(), whole));
  }
}

TEST_CASE("without chunk_size, a mid-sized ensemble runs in blocks: same values, less memory") {
  // 111 KB of parameters a set, 64 rows: blocks of 9 sets (functional_vmap.cpp's auto_blocks),
  // three blocks for 24 sets
  auto nets = ensemble(24, [] { return mlp(128, 200, 10, 0.5); });
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({64, 128});
  auto run = [&](std::optional<int64_t> c, bool loop) {
    manual_seed(3);
    reset_peak_memory();
    const int64_t start = memory_stats().current_bytes;
    Tensor out = functional_vmap(*nets[0], {.params = params,
                                            .args = {x},
                                            .randomness = Randomness::Different,
                                            .chunk_size = c,
                                            .loop = loop})
                     .tensor();
    return std::make_pair(out, memory_stats().peak_bytes - start);
  };
  auto [blocked, blocked_peak] = run(std::nullopt, false);
  auto [whole, whole_peak] = run(24, false);  // chunk_size >= the batch: one chunk
  CHECK(equal(blocked, whole));
  CHECK(equal(blocked, run(std::nullopt, true).first));
  CHECK(equal(blocked, run(5, false).first));
  // the activations of 9 sets at a time, not 24 (each [64, 200] float32, 51 KB)
  CHECK(blocked_peak * 2 < whole_peak);
}

namespace {
// An ensemble of mlp(in, hidden, out) on a shared [rows, in] without a chunk_size: the values of
// all sets at once, of one at a time and of the loop, and under half the peak memory of all sets
// at once (auto_blocks ran it in blocks).
void check_runs_in_blocks(int64_t sets, int64_t in, int64_t hidden, int64_t out, int64_t rows) {
  auto nets = ensemble(sets, [&] { return mlp(in, hidden, out); });
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({rows, in});
  auto run = [&](std::optional<int64_t> c) {
    reset_peak_memory();
    const int64_t start = memory_stats().current_bytes;
    Tensor y = functional_vmap(*nets[0], {.params = params, .args = {x}, .chunk_size = c}).tensor();
    return std::make_pair(y, memory_stats().peak_bytes - start);
  };
  auto [blocked, blocked_peak] = run(std::nullopt);
  auto [whole, whole_peak] = run(sets);
  CHECK(equal(blocked, whole));
  CHECK(equal(blocked, run(1).first));
  CHECK(close(blocked, loop_reference(*nets[0], params, {x}, {}, {})));
  CHECK(blocked_peak * 2 < whole_peak);
}
}  // namespace

TEST_CASE("without chunk_size, small sets with large activations run in blocks too") {
  // 35 KB of parameters a set but [512, 128] activations (256 KB): blocks of 4 sets
  check_runs_in_blocks(16, 64, 128, 4, 512);
}

TEST_CASE("without chunk_size, sets whose activations alone outgrow the cache run one by one") {
  // 11 KB of parameters a set but [4096, 128] activations (2 MB): one set at a time
  check_runs_in_blocks(4, 16, 128, 4, 4096);
}

namespace {
// Restores one thread when a test ends, passing or not.
struct Threads {
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(1); }
};
}  // namespace

// With two threads, blocks of sets run at once (functional_vmap.cpp's auto_blocks): mid-sized
// sets in cache-sized blocks, small ones in one block per thread. Everything must be as on one
// thread: values, each set's dropout draws, the generator's state afterwards, BatchNorm's
// per-set buffers, errors.
TEST_CASE("two threads run blocks of sets at once: values, draws, buffers and errors as on one") {
  struct Case {
    const char* name;
    int64_t sets, in, hidden, out, rows;
    bool per_set, batch_norm;
  };
  const Case cases[] = {{"mid-sized sets, shared input", 24, 128, 200, 10, 64, false, false},
                        {"mid-sized sets, per-set input", 24, 128, 200, 10, 64, true, false},
                        {"small sets", 256, 16, 32, 4, 64, false, false},
                        {"mid-sized sets with BatchNorm", 12, 128, 200, 10, 64, false, true}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    manual_seed(11);
    auto nets = ensemble(static_cast<int>(c.sets), [&] {
      auto seq = std::make_shared<nn::Sequential>();
      seq->push_back(std::make_shared<nn::Linear>(c.in, c.hidden));
      if (c.batch_norm) seq->push_back(std::make_shared<nn::BatchNorm1d>(c.hidden));
      seq->push_back(std::make_shared<nn::ReLU>());
      seq->push_back(std::make_shared<nn::Dropout>(0.5));
      seq->push_back(std::make_shared<nn::Linear>(c.hidden, c.out));
      return std::shared_ptr<nn::Module>(seq);
    });
    for (auto& n : nets) n->train();
    const TensorDict initial = TensorDict::from_modules(nets);
    // the input per set (kwarg "input", in_dims 0) or shared (positional)
    auto options = [&](const TensorDict& params, const Tensor& input, Randomness rnd, bool loop) {
      nn::FunctionalVmapOptions o{.params = params, .randomness = rnd, .loop = loop};
      if (c.per_set) {
        o.kwargs = {{"input", input}};
        o.in_dims = {{"input", 0}};
      } else {
        o.args = {input};
      }
      return o;
    };
    auto input = [&](int64_t width) {
      return c.per_set ? randn({c.sets, c.rows, width}) : randn({c.rows, width});
    };
    Tensor x = input(c.in);
    auto run = [&](int threads, bool loop, Randomness rnd = Randomness::Different) {
      Threads t(threads);
      TensorDict params = initial.clone();
      manual_seed(5);
      Tensor out = functional_vmap(*nets[0], options(params, x, rnd, loop)).tensor();
      Tensor after = rand({8});  // the generator continues as after a one-thread call
      return std::make_tuple(out, after, params);
    };
    auto [one, one_after, one_params] = run(1, false);
    auto [two, two_after, two_params] = run(2, false);
    CHECK(equal(two, one));
    CHECK(equal(two_after, one_after));
    CHECK(equal(two, std::get<0>(run(2, true))));
    // Same: one mask for every set, also when blocks draw on different threads
    Tensor same = std::get<0>(run(2, false, Randomness::Same));
    CHECK(equal(same, std::get<0>(run(1, false, Randomness::Same))));
    CHECK_FALSE(equal(same, two));
    for (const auto& [key, t] : one_params.leaves()) {
      CAPTURE(key);
      CHECK(equal(two_params.get(key), t));
    }
    if (c.batch_norm)
      CHECK_FALSE(equal(one_params.get("1.running_mean"), initial.get("1.running_mean")));
    // an error inside the blocks reaches the caller, and the buffers are put back
    Threads t(2);
    TensorDict params = initial.clone();
    const auto o = options(params, input(c.in + 1), Randomness::Different, false);
    CHECK_THROWS_AS(functional_vmap(*nets[0], o), ValueError);
    CHECK(td::test::has(message_of([&] { functional_vmap(*nets[0], o); }), "linear"));
    for (const auto& [key, v] : initial.leaves()) {
      CAPTURE(key);
      CHECK(equal(params.get(key), v));
    }
  }
}

// A set's product large enough for the BLAS and for cutting among threads (x [300, 300] is
// 352 KiB, 11.5 MFLOP against the first layer) is cut by its shape and the thread count only:
// how many sets a call holds must not change its bits (OpenBLAS's own threads, used before for
// a call of one set, cut it by their count).
TEST_CASE("with threads, chunk_size and loop give the same bits when the BLAS runs the products") {
  manual_seed(4);
  auto nets = ensemble(4, [] { return mlp(300, 64, 5); });
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({300, 300}), xs = randn({4, 300, 300});
  for (int threads : {2, 3}) {
    CAPTURE(threads);
    Threads t(threads);
    const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
    const nn::FunctionalVmapOptions per_set{
        .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}};
    for (const auto& o : {shared, per_set}) {
      Tensor whole = functional_vmap(*nets[0], o).tensor();
      check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 3});
    }
    // each set as its module alone computes it, on as many threads
    Tensor whole = functional_vmap(*nets[0], shared).tensor();
    for (int64_t i = 0; i < 4; ++i) CHECK(equal((*nets[i])({x}).tensor(), whole[i]));
  }
}

namespace {
// A user's module: its forward counts its calls and the threads they came from.
struct Recorder : nn::Module {
  std::shared_ptr<nn::Linear> l1, l2;
  std::mutex m;
  std::set<std::thread::id> threads;
  int calls = 0;
  Recorder() {
    l1 = register_module("l1", std::make_shared<nn::Linear>(128, 200));
    l2 = register_module("l2", std::make_shared<nn::Linear>(200, 10));
    register_method("forward", &Recorder::forward, {"input"});
  }
  std::string type_name() const override { return "Recorder"; }
  Tensor forward(const Tensor& input) {
    {
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
      ++calls;
    }
    return l2->forward(relu(l1->forward(input)));
  }
};
}  // namespace

// Blocks of sets run at once only through td's own modules: a user's module (which may keep
// state, as this one does) is called once, on the caller's thread, also inside a Sequential.
TEST_CASE("two threads: a user's module is never called from several threads") {
  manual_seed(12);
  std::vector<std::shared_ptr<Recorder>> recs;
  for (int i = 0; i < 24; ++i) recs.push_back(std::make_shared<Recorder>());
  TensorDict params = TensorDict::from_modules(recs);
  Tensor x = randn({64, 128});
  Tensor one = functional_vmap(*recs[0], {.params = params, .args = {x}}).tensor();
  recs[0]->calls = 0;
  recs[0]->threads.clear();
  Threads t(2);
  Tensor two = functional_vmap(*recs[0], {.params = params, .args = {x}}).tensor();
  CHECK(equal(two, one));
  CHECK(recs[0]->calls == 1);
  CHECK(recs[0]->threads == std::set<std::thread::id>{std::this_thread::get_id()});
  // inside td's Sequential too
  std::vector<std::shared_ptr<nn::Sequential>> seqs;
  for (int i = 0; i < 24; ++i)
    seqs.push_back(std::make_shared<nn::Sequential>(
        std::vector<std::shared_ptr<nn::Module>>{std::make_shared<Recorder>()}));
  auto inner = std::dynamic_pointer_cast<Recorder>(seqs[0]->children()[0]);
  REQUIRE(inner);
  Tensor y =
      functional_vmap(*seqs[0], {.params = TensorDict::from_modules(seqs), .args = {x}}).tensor();
  CHECK(y.shape() == Shape{24, 64, 10});
  CHECK(inner->calls == 1);
  CHECK(inner->threads == std::set<std::thread::id>{std::this_thread::get_id()});
}

// vmap_call's concurrent chunks (functional_vmap's blocks) run on two threads at once, and the
// ops inside each see one thread.
TEST_CASE("concurrent chunks run on two threads at once, their ops serially") {
  Threads t(2);
  std::mutex m;
  std::set<std::thread::id> ids;
  std::atomic<int> max_threads_seen{0};
  auto f = [&](const ValueList& a) -> Value {
    {
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    }
    max_threads_seen = std::max(max_threads_seen.load(), num_threads());
    // wait (up to 2 s) for a second thread to take a chunk, so one cannot run them all
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard<std::mutex> lock(m);
        if (ids.size() > 1) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Value(mul(a[0].tensor(), 2.0));
  };
  Tensor x = arange(12).view({6, 2}).to(kFloat32);
  Value out = vmap_call(f, {Value(x)}, {.chunk_size = 2}, true);
  CHECK(equal(out.tensor(), mul(x, 2.0)));
  CHECK(ids.size() == 2);
  CHECK(max_threads_seen.load() == 1);
  CHECK(num_threads() == 2);
}

namespace {
// A module with a second method and keyword arguments.
struct Scaler : nn::Module {
  nn::Param weight;
  Scaler() {
    weight = register_parameter("weight", randn({3}));
    register_method("forward", &Scaler::forward, {"input"});
    register_method("scaled", &Scaler::scaled, {"input", "factor", "shift"},
                    {{"shift", Value(0.0)}});
  }
  std::string type_name() const override { return "Scaler"; }
  Tensor forward(const Tensor& input) { return input * weight.get(); }
  Tensor scaled(const Tensor& input, double factor, double shift) {
    return input * weight.get() * factor + shift;
  }
};
}  // namespace

namespace {
// Convolution parameters and a forward that takes no tensor: nothing to size blocks of sets by.
struct FilterBank : nn::Module {
  std::shared_ptr<nn::Conv2d> conv;
  FilterBank() {
    conv = register_module("conv", std::make_shared<nn::Conv2d>(2, 3, 3));
    register_method("forward", &FilterBank::forward, {"scale"});
  }
  std::string type_name() const override { return "FilterBank"; }
  Tensor forward(double scale) { return conv->weight.get() * scale; }
};
}  // namespace

TEST_CASE("a module with convolution weights and no tensor input runs without blocks") {
  // auto_blocks looked at the first tensor input's dims before checking there was one
  std::vector<std::shared_ptr<FilterBank>> mods;
  for (int i = 0; i < 4; ++i) mods.push_back(std::make_shared<FilterBank>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor out = functional_vmap(*mods[0], {.params = params, .args = {Value(2.0)}}).tensor();
  REQUIRE(out.shape() == Shape{4, 3, 2, 3, 3});
  for (int i = 0; i < 4; ++i) CHECK(equal(out[i], mods[i]->conv->weight.get() * 2.0));
}

TEST_CASE("method calls a registered method with keyword inputs") {
  manual_seed(4);
  std::vector<std::shared_ptr<Scaler>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Scaler>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor x = randn({2, 3});
  Value out = functional_vmap(*mods[0], {.params = params,
                                         .kwargs = {{"input", x}, {"factor", 2.0}, {"shift", 1.0}},
                                         .method = "scaled"});
  REQUIRE(out.tensor().shape() == Shape{3, 2, 3});
  auto xv = x.to_vector<float>();
  auto ov = out.tensor().contiguous().to_vector<float>();
  for (int i = 0; i < 3; ++i) {
    auto w = mods[i]->weight.get().to_vector<float>();
    for (int n = 0; n < 2; ++n)
      for (int k = 0; k < 3; ++k)
        CHECK(ov[(i * 2 + n) * 3 + k] == doctest::Approx(xv[n * 3 + k] * w[k] * 2 + 1));
  }
  CHECK_THROWS_AS(functional_vmap(*mods[0], {.params = params, .args = {x}, .method = "nope"}),
                  KeyError);
}

TEST_CASE("BatchNorm in training updates each set's slice of the stacked buffers") {
  manual_seed(5);
  auto make = [] {
    auto seq = std::make_shared<nn::Sequential>();
    seq->push_back(std::make_shared<nn::Linear>(4, 6));
    seq->push_back(std::make_shared<nn::BatchNorm1d>(6));
    return std::shared_ptr<nn::Module>(seq);
  };
  auto nets = ensemble(3, make);
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  TensorDict ref_params = params.clone();
  Tensor x = randn({3, 8, 4});
  for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
    Value out = functional_vmap(
        *nets[0],
        {.params = params, .kwargs = {{"input", x}}, .in_dims = {{"input", 0}}, .chunk_size = c});
    Tensor ref = loop_reference(*nets[0], ref_params, {}, {{"input", x}}, {{"input", 0}});
    CHECK(close(out.tensor(), ref, 1e-5));
    for (const char* key : {"1.running_mean", "1.running_var"})
      CHECK(close(params.get(key), ref_params.get(key), 1e-5));
    CHECK(equal(params.get("1.num_batches_tracked"), ref_params.get("1.num_batches_tracked")));
  }
  // the module's own buffers are untouched
  CHECK(equal(nets[0]->named_buffers()[0].second, zeros({6})));
}

TEST_CASE("the module is never mutated; an exception leaves module and params as they were") {
  manual_seed(6);
  auto nets = ensemble(3, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  auto before = nets[0]->named_parameters();
  TensorDict snapshot = params.clone();
  // a wrong input shape makes the module throw part way
  CHECK_THROWS(functional_vmap(*nets[0], {.params = params, .args = {randn({5, 7})}}));
  CHECK_THROWS(
      functional_vmap(*nets[0], {.params = params, .args = {randn({5, 7})}, .loop = true}));
  auto after = nets[0]->named_parameters();
  for (size_t i = 0; i < before.size(); ++i) CHECK(after[i].second.is_same(before[i].second));
  for (const auto& [k, t] : params.leaves()) CHECK(equal(t, snapshot.get(k)));
  Tensor x = randn({5, 3});
  CHECK(close(functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor(),
              loop_reference(*nets[0], params, {x}, {}, {})));
}

TEST_CASE("a submodule used twice takes one tensor per set; tied entries that differ are refused") {
  manual_seed(9);
  auto nets = ensemble(3, [] {
    auto lin = std::make_shared<nn::Linear>(3, 3);
    return std::make_shared<nn::Sequential>(
        std::initializer_list<std::shared_ptr<nn::Module>>{lin, std::make_shared<nn::ReLU>(), lin});
  });
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({5, 3});
  std::vector<Tensor> want;
  for (int64_t i = 0; i < 3; ++i) {
    const Tensor w = params.get("0.weight").select(0, i), b = params.get("0.bias").select(0, i);
    want.push_back(linear(relu(linear(x, w, b)), w, b));
  }
  const nn::FunctionalVmapOptions o{.params = params, .args = {x}};
  const Tensor whole = functional_vmap(*nets[0], o).tensor();
  CHECK(close(whole, stack(want, 0)));
  check_same_bits_chunked_and_looped(*nets[0], o, whole, {1, 2});

  // a value given for one use only would be dropped: refused, batched, chunked, looped, unbatched
  TensorDict edited = params.clone();
  edited.set("2.weight", params.get("2.weight") + 1.0);
  for (int mode = 0; mode < 3; ++mode) {
    CAPTURE(mode);
    nn::FunctionalVmapOptions e{.params = edited, .args = {x}};
    if (mode == 1) e.chunk_size = 2;
    if (mode == 2) e.loop = true;
    td::test::check_throws_mentioning<ValueError>(
        [&] { functional_vmap(*nets[0], e); },
        "[functional_vmap] params gives '0.weight' and '2.weight' different tensors");
  }
  td::test::check_throws_mentioning<ValueError>(
      [&] { functional_vmap(*nets[0], {.params = edited[1], .args = {x}}); },
      "'0.weight' and '2.weight'");
  // the same tensor under both names
  edited.set("2.weight", edited.get("0.weight"));
  CHECK(functional_vmap(*nets[0], {.params = edited, .args = {x}}).tensor().shape() ==
        Shape{3, 5, 3});
}

TEST_CASE("two threads on one module with different params") {
  manual_seed(8);
  auto nets = ensemble(4, [] { return mlp(3, 8, 2); });
  TensorDict pa = TensorDict::from_modules(nets);
  TensorDict pb = pa.apply([](const Tensor& t) { return t * 2.0; });
  Tensor x = randn({5, 3});
  Tensor ra = loop_reference(*nets[0], pa, {x}, {}, {});
  Tensor rb = loop_reference(*nets[0], pb, {x}, {}, {});
  std::atomic<int> bad{0};
  auto work = [&](const TensorDict& p, const Tensor& ref) {
    for (int i = 0; i < 200; ++i)
      if (!close(functional_vmap(*nets[0], {.params = p, .args = {x}}).tensor(), ref)) ++bad;
  };
  std::thread ta(work, std::cref(pa), std::cref(ra));
  std::thread tb(work, std::cref(pb), std::cref(rb));
  ta.join();
  tb.join();
  CHECK(bad.load() == 0);
}

TEST_CASE("errors name the key, the dim and the shapes") {
  auto nets = ensemble(3, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor xs = randn({3, 5, 3});
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"x", 0}}}),
      KeyError);
  CHECK(message_of([&] {
          functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"x", 0}}});
        }).find("'x'") != std::string::npos);
  TensorDict single = TensorDict::from_module(m);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = single, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}}),
      ValueError);
  std::string msg = message_of([&] {
    functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}});
  });
  CHECK(msg.find("input") != std::string::npos);
  CHECK(msg.find("[3, 5, 3]") != std::string::npos);
  CHECK(msg.find("[3]") != std::string::npos);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 1}}}),
      ValueError);
  CHECK_THROWS_AS(
      functional_vmap(m, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 3}}}),
      ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params,
                                      .args = {randn({5, 3})},
                                      .randomness = Randomness::Same,
                                      .loop = true}),
                  ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params, .args = {randn({5, 3})}, .chunk_size = 0}),
                  ValueError);
  CHECK_THROWS_AS(functional_vmap(m, {.params = params, .args = {randn({5, 3})}, .chunk_size = -2}),
                  ValueError);
  CHECK_THROWS_AS(parse_randomness("sometimes"), ValueError);
  CHECK(parse_randomness("same") == Randomness::Same);
  // params that do not fit the module: a missing key, an extra key, a wrong per-set shape
  TensorDict missing = params.clone();
  missing.erase("0.bias");
  CHECK_THROWS_AS(functional_vmap(m, {.params = missing, .args = {randn({5, 3})}}), KeyError);
  TensorDict extra = params.clone();
  extra.set("extra", zeros({3, 2}));
  CHECK_THROWS_AS(functional_vmap(m, {.params = extra, .args = {randn({5, 3})}}), KeyError);
  TensorDict wrong = params.clone();
  wrong.set("0.bias", zeros({3, 5}));
  std::string shape_msg = message_of([&] {
    functional_vmap(m, {.params = wrong, .args = {randn({5, 3})}});
  });
  CHECK(shape_msg.find("0.bias") != std::string::npos);
  CHECK(shape_msg.find("[5]") != std::string::npos);
  CHECK_THROWS_AS(functional_vmap(m, {.params = wrong, .args = {randn({5, 3})}}), ValueError);
}

namespace {

// One module of each kind with the inputs its forward takes (per set, unbatched).
struct ModuleCase {
  const char* name;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::function<ValueDict()> inputs;  // fresh per-set inputs
  bool train = false;
};

std::vector<ModuleCase> module_cases() {
  auto seq = [](std::vector<std::shared_ptr<nn::Module>> m) {
    return std::shared_ptr<nn::Module>(std::make_shared<nn::Sequential>(m));
  };
  auto x = [](Shape s) { return [s] { return ValueDict{{"input", randn(s)}}; }; };
  return {
      {"MLP", [] { return mlp(4, 8, 3); }, x({5, 4})},
      {"LayerNorm MLP",
       [=] {
         return seq({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::LayerNorm>(8),
                     std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(8, 2)});
       },
       x({5, 4})},
      {"BatchNorm eval",
       [=] {
         auto m = seq({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6)});
         return m;
       },
       x({7, 4})},
      {"BatchNorm train",
       [=] {
         return seq({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6)});
       },
       x({7, 4}), true},
      {"CNN",
       [=] {
         return seq({std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1), std::make_shared<nn::ReLU>(),
                     std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                     std::make_shared<nn::Linear>(12, 2)});
       },
       x({2, 2, 4, 4})},
      {"CNN with AvgPool2d",
       [=] {
         return seq({std::make_shared<nn::Conv2d>(2, 3, 3, 1, 1),
                     std::make_shared<nn::AvgPool2d>(3, 2, 1, true, false),
                     std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(27, 2)});
       },
       x({2, 2, 4, 4})},
      {"Conv2d reflect, same",
       [=] {
         return seq(
             {std::make_shared<nn::Conv2d>(2, 3, nn::Size2{2, 3}, 1, "same", 1, 1, true, "reflect"),
              std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(48, 2)});
       },
       x({2, 2, 4, 4})},
      {"Embedding",
       [] { return std::shared_ptr<nn::Module>(std::make_shared<nn::Embedding>(9, 3)); },
       [] {
         return ValueDict{{"input", tensor<int64_t>({1, 8, 0, 3, 3, 5}, {2, 3})}};
       }},
      {"MultiheadAttention",
       [] {
         return std::shared_ptr<nn::Module>(
             std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true));
       },
       [] {
         return ValueDict{
             {"query", randn({2, 4, 8})}, {"key", randn({2, 5, 8})}, {"value", randn({2, 5, 8})}};
       }},
      {"MultiheadAttention kdim, vdim, bias_kv, zero_attn",
       [] {
         return std::shared_ptr<nn::Module>(
             std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true, true, true, 5, 3));
       },
       [] {
         return ValueDict{
             {"query", randn({2, 4, 8})}, {"key", randn({2, 5, 5})}, {"value", randn({2, 5, 3})}};
       }},
  };
}

// The Tensor leaves of a module output, in order (a tensor, or MHA's (output, weights)).
std::vector<Tensor> leaves_of(const Value& v) {
  std::vector<Tensor> out;
  for_each_tensor(v, [&](const Tensor& t) { out.push_back(t); });
  return out;
}

}  // namespace

TEST_CASE("every module kind: functional_vmap equals the modules called one by one") {
  const int64_t B = 4;
  for (const auto& c : module_cases()) {
    CAPTURE(c.name);
    manual_seed(21);
    std::vector<std::shared_ptr<nn::Module>> mods;
    for (int64_t i = 0; i < B; ++i) mods.push_back(c.make());
    for (auto& m : mods) m->train(c.train);
    nn::Module& m = *mods[0];
    const TensorDict params = TensorDict::from_modules(mods);
    std::vector<ValueDict> per_set;
    for (int64_t i = 0; i < B; ++i) per_set.push_back(c.inputs());
    const ValueDict shared = c.inputs();

    // the reference: module i alone (to_module), on its own copy of the parameters
    auto reference = [&](const std::function<ValueDict(int64_t)>& kwargs_of) {
      TensorDict ref_params = params.clone();
      std::vector<std::vector<Tensor>> outs;
      for (int64_t i = 0; i < B; ++i) {
        auto guard = ref_params[i].to_module(m);
        outs.push_back(leaves_of(m({}, kwargs_of(i))));
      }
      std::vector<Tensor> stacked;
      for (size_t k = 0; k < outs[0].size(); ++k) {
        std::vector<Tensor> parts;
        for (auto& o : outs) parts.push_back(o[k]);
        stacked.push_back(stack(parts, 0));
      }
      return std::make_pair(stacked, ref_params);
    };
    auto check = [&](const nn::FunctionalVmapOptions& o,
                     const std::pair<std::vector<Tensor>, TensorDict>& ref) {
      nn::FunctionalVmapOptions opts = o;
      opts.params = o.params.clone();  // BatchNorm in training updates it
      auto got = leaves_of(functional_vmap(m, opts));
      REQUIRE(got.size() == ref.first.size());
      for (size_t k = 0; k < got.size(); ++k) CHECK(close(got[k], ref.first[k], 1e-5));
      for (const auto& [key, t] : ref.second.leaves())
        CHECK(allclose(opts.params.get(key).to(kFloat64), t.to(kFloat64), 1e-5, 1e-6));
    };

    // shared inputs, chunk sizes 1, 3, B and none, and loop
    auto ref_shared = reference([&](int64_t) { return shared; });
    for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{1},
                                         std::optional<int64_t>{3}, std::optional<int64_t>{B}})
      check({.params = params, .kwargs = shared, .chunk_size = chunk}, ref_shared);
    check({.params = params, .kwargs = shared, .loop = true}, ref_shared);

    // per-set inputs stacked at dim 0, 1 and -1
    auto ref_per_set = reference([&](int64_t i) { return per_set[i]; });
    for (int64_t d : {0, 1, -1}) {
      CAPTURE(d);
      ValueDict kwargs;
      std::map<std::string, int64_t> in_dims;
      for (const auto& [key, v] : per_set[0].items()) {
        std::vector<Tensor> parts;
        for (int64_t i = 0; i < B; ++i) parts.push_back(per_set[i].at(key).tensor());
        kwargs.set(key, stack(parts, d < 0 ? parts[0].dim() + 1 + d : d));
        in_dims[key] = d;
      }
      for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{3}})
        check({.params = params, .kwargs = kwargs, .in_dims = in_dims, .chunk_size = chunk},
              ref_per_set);
      check({.params = params, .kwargs = kwargs, .in_dims = in_dims, .loop = true}, ref_per_set);
    }
  }
}

TEST_CASE("BatchNorm in training on an empty batch: empty output, stats kept, counter counts") {
  // as torch 1.13's BatchNorm1d(2).train()(zeros(0, 2)) per set
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 3; ++i) nets.push_back(std::make_shared<nn::BatchNorm1d>(2));
  TensorDict params = TensorDict::from_modules(nets);
  nets[0]->train();
  Value y = nn::functional_vmap(*nets[0], {.params = params, .args = {zeros({0, 2})}});
  CHECK(y.tensor().shape() == Shape{3, 0, 2});
  CHECK(params.get("running_mean").to_vector<float>() == std::vector<float>(6, 0.f));
  CHECK(params.get("running_var").to_vector<float>() == std::vector<float>(6, 1.f));
  CHECK(params.get("num_batches_tracked").to_vector<int64_t>() == std::vector<int64_t>(3, 1));
  // one value per channel is an error naming the per-set shape, not the channel-folded one
  for (bool loop : {false, true}) {
    std::string m = message_of([&] {
      nn::functional_vmap(*nets[0], {.params = params, .args = {zeros({1, 2, 1})}, .loop = loop});
    });
    CHECK(test::has(m, "more than 1 value per channel"));
    CHECK(test::has(m, "[1, 2, 1]"));
  }
}

// as torch ("mixed dtype"): a float64 input with float32 weights (no running stats) or float32
// running stats (no affine) raises, batched as in a loop, and leaves the stats as they were
TEST_CASE("BatchNorm: a weight or running stats of another dtype than the input are a TypeError") {
  struct Case {
    bool affine, track;
  };
  Tensor x = randn({4, 2}).to(kFloat64);
  for (Case c : {Case{true, false}, Case{false, true}}) {
    CAPTURE(c.affine);
    std::vector<std::shared_ptr<nn::Module>> nets;
    for (int i = 0; i < 3; ++i)
      nets.push_back(std::make_shared<nn::BatchNorm1d>(2, 1e-5, 0.1, c.affine, c.track));
    TensorDict params = TensorDict::from_modules(nets);
    for (bool training : {false, true})
      for (bool loop : {false, true}) {
        nets[0]->train(training);
        CAPTURE(training);
        CAPTURE(loop);
        CHECK_THROWS_AS(
            nn::functional_vmap(*nets[0], {.params = params, .args = {x}, .loop = loop}),
            TypeError);
        if (c.track)
          CHECK(params.get("running_mean").to_vector<float>() == std::vector<float>(6, 0.f));
      }
  }
  CHECK_THROWS_AS(batch_norm(x, zeros({2}), ones({2})), TypeError);
}

// Also with the root in eval and only the BatchNorm in training (the snapshot looked at the root).
TEST_CASE("an exception after BatchNorm updated its stats puts the stacked buffers back") {
  manual_seed(9);
  for (bool root_training : {true, false}) {
    auto make = [&] {
      // the last Linear expects 7 features but gets 6: it throws after BatchNorm ran
      auto seq =
          std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
              std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6),
              std::make_shared<nn::Linear>(7, 2)});
      seq->train(root_training);
      (*seq)[1]->train();
      return std::shared_ptr<nn::Module>(seq);
    };
    auto nets = ensemble(3, make);
    TensorDict params = TensorDict::from_modules(nets);
    TensorDict before = params.clone();
    Tensor x = randn({5, 4});
    for (bool loop : {false, true}) {
      CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params, .args = {x}, .loop = loop}),
                      ValueError);
      for (const auto& [key, t] : params.leaves()) CHECK(equal(t, before.get(key)));
    }
    // params without batch dims: one plain call, same promise
    TensorDict one = TensorDict::from_module(*nets[0]).clone();
    TensorDict one_before = one.clone();
    CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = one, .args = {x}}), ValueError);
    for (const auto& [key, t] : one.leaves()) CHECK(equal(t, one_before.get(key)));
  }
}

namespace {
// forward(input): adds one to its buffer `count`, then fails (a user's module in eval mode)
struct CountsThenThrows : nn::Module {
  Tensor count;
  CountsThenThrows() {
    count = register_buffer("count", zeros({2}));
    register_method("forward", &CountsThenThrows::forward, {"input"});
  }
  Tensor forward(const Tensor& input) {
    add_(count, 1.0);
    throw_error<RuntimeError>("[CountsThenThrows] fails after writing its buffer");
    return input;
  }
};
}  // namespace

TEST_CASE("a failed call puts back a buffer a module in eval wrote") {
  Tensor x = randn({5, 4});
  std::vector<std::shared_ptr<nn::Module>> counters{std::make_shared<CountsThenThrows>(),
                                                    std::make_shared<CountsThenThrows>()};
  for (auto& c : counters) c->eval();
  TensorDict cp = TensorDict::from_modules(counters);
  CHECK_THROWS_AS(functional_vmap(*counters[0], {.params = cp, .args = {x}}), RuntimeError);
  CHECK(cp.get("count").to_vector<float>() == std::vector<float>(4, 0.0f));
}

TEST_CASE("buffers updated through params whose batch dims cannot be viewed as one") {
  manual_seed(11);
  std::vector<std::shared_ptr<nn::Module>> bns;
  for (int i = 0; i < 6; ++i) {
    bns.push_back(std::make_shared<nn::BatchNorm1d>(3));
    bns.back()->train();
  }
  // batch [2, 3] laid out transposed: flattening it to 6 sets copies every leaf
  auto transposed = [&] {
    return TensorDict::from_modules(bns).apply(
        [](const Tensor& t) {
          Shape s{3, 2};
          s.insert(s.end(), t.shape().begin() + 1, t.shape().end());
          return t.reshape(s).transpose(0, 1);
        },
        Shape{2, 3});
  };
  Tensor x = randn({8, 3});
  auto at = [](Tensor t, std::initializer_list<int64_t> idx) {
    for (int64_t i : idx) t = t.select(0, i);
    return t.item<double>();
  };
  for (bool loop : {false, true}) {
    TensorDict p = transposed();
    functional_vmap(*bns[0], {.params = p, .args = {x}, .loop = loop});
    // by hand: every set saw the same x, so running_mean = 0.1 * mean(x) and running_var =
    // 0.9 + 0.1 * unbiased var(x), per feature, in every set
    for (int64_t f = 0; f < 3; ++f) {
      double mean = 0, sq = 0;
      for (int64_t r = 0; r < 8; ++r) mean += at(x, {r, f}) / 8.0;
      for (int64_t r = 0; r < 8; ++r) sq += (at(x, {r, f}) - mean) * (at(x, {r, f}) - mean);
      for (int64_t a = 0; a < 2; ++a)
        for (int64_t b = 0; b < 3; ++b) {
          CHECK(at(p.get("running_mean"), {a, b, f}) == doctest::Approx(0.1 * mean).epsilon(1e-5));
          CHECK(at(p.get("running_var"), {a, b, f}) ==
                doctest::Approx(0.9 + 0.1 * sq / 7.0).epsilon(1e-5));
        }
    }
    CHECK(p.get("num_batches_tracked").to_vector<int64_t>() == std::vector<int64_t>(6, 1));
  }
}

namespace {
// methods with string and int arguments, and one returning a number beside a tensor
struct Tagger : nn::Module {
  nn::Param w;
  Tagger() {
    w = register_parameter("w", ones({2}));
    register_method("forward", &Tagger::forward, {"input", "mode", "times"});
    register_method("with_count", &Tagger::with_count, {"input"});
  }
  Tensor forward(const Tensor& input, std::string mode, int times) {
    return mode == "scale" ? input * w * static_cast<double>(times) : input * w;
  }
  Value with_count(const Tensor& input) { return ValueList{Value(input * w), Value(3.0)}; }
};
}  // namespace

TEST_CASE("bound methods take strings and ints; a number output raises, batched and looped") {
  std::vector<std::shared_ptr<nn::Module>> ts{std::make_shared<Tagger>(),
                                              std::make_shared<Tagger>()};
  TensorDict params = TensorDict::from_modules(ts);
  Tensor x = ones({2});
  for (bool loop : {false, true}) {
    Value y = functional_vmap(*ts[0], {.params = params, .args = {x, "scale", 3}, .loop = loop});
    CHECK(y.tensor().to_vector<float>() == std::vector<float>(4, 3.0f));
    CHECK_THROWS_AS(functional_vmap(*ts[0], {.params = params, .args = {x, "scale", 1.5}}),
                    TypeError);  // times is an int
    CHECK_THROWS_AS(
        functional_vmap(*ts[0], {.params = params, .args = {x}, .method = "with_count",
                                 .loop = loop}),
        ValueError);
    // named as functional_vmap's, batched too (not vmap's, which suggests an out_dims)
    const std::string m = message_of([&] {
      functional_vmap(*ts[0],
                      {.params = params, .args = {x}, .method = "with_count", .loop = loop});
    });
    CHECK_MESSAGE(m.find("[functional_vmap] the module must only return Tensors") == 0, m);
    CHECK_MESSAGE(m.find("float") != std::string::npos, m);
    CHECK_MESSAGE(m.find("out_dims") == std::string::npos, m);
  }
}

TEST_CASE("float indices raise, batched and in a loop") {
  std::vector<std::shared_ptr<nn::Module>> embs{std::make_shared<nn::Embedding>(4, 2),
                                                std::make_shared<nn::Embedding>(4, 2)};
  TensorDict params = TensorDict::from_modules(embs);
  for (bool loop : {false, true}) {
    // an index 1.7 must not become row 1
    CHECK_THROWS_AS(functional_vmap(*embs[0], {.params = params,
                                               .args = {tensor({1.7f, 2.2f})},
                                               .loop = loop}),
                    TypeError);
    CHECK(message_of([&] {
            functional_vmap(*embs[0],
                            {.params = params, .args = {tensor({1.7f, 2.2f})}, .loop = loop});
          }).find("[embedding] indices must be int64") != std::string::npos);
  }
}

namespace {
// forward(input) = a * weight + b, with a and b taken from a dict, a list or a TensorDict.
struct Mixer : nn::Module {
  nn::Param weight;
  Mixer() {
    weight = register_parameter("weight", randn({4}));
    register_method("forward", &Mixer::forward, {"input"});
  }
  std::string type_name() const override { return "Mixer"; }
  Tensor forward(const Value& input) {
    Tensor a, b;
    if (input.is_dict()) a = input.dict().at("a").tensor(), b = input.dict().at("b").tensor();
    if (input.is_list()) a = input.list().at(0).tensor(), b = input.list().at(1).tensor();
    if (input.is_tensordict()) a = input.tensordict().get("a"), b = input.tensordict().get("b");
    if (input.is_dict() && input.dict().contains("c") && !input.dict().at("c").is_none())
      throw std::runtime_error("Mixer: 'c' should stay None");
    if (input.is_dict() && input.dict().contains("note") && input.dict().at("note").str() != "text")
      throw std::runtime_error("Mixer: 'note' should stay 'text'");
    return a * weight.get() + b;
  }
};
}  // namespace

TEST_CASE("in_dims on a dict, list or TensorDict input splits every Tensor leaf into sets") {
  manual_seed(10);
  std::vector<std::shared_ptr<Mixer>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Mixer>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor a = randn({3, 5, 4}), b = randn({3, 4});  // set at dim 0
  // expected by hand: out[i, n, k] = a[i, n, k] * w_i[k] + b[i, k]
  auto av = a.to_vector<float>(), bv = b.to_vector<float>();
  std::vector<float> want;
  for (int i = 0; i < 3; ++i) {
    auto w = mods[i]->weight.get().to_vector<float>();
    for (int n = 0; n < 5; ++n)
      for (int k = 0; k < 4; ++k) want.push_back(av[(i * 5 + n) * 4 + k] * w[k] + bv[i * 4 + k]);
  }
  Tensor expected = tensor(want).view({3, 5, 4});
  ValueDict as_dict;
  as_dict.set("a", a);
  as_dict.set("b", b);
  // a TensorDict of batch_size [5, 3] holding the sets at its dim 1 (= -1)
  TensorDict as_td({{"a", a.permute({1, 0, 2})}, {"b", b.unsqueeze(0).expand({5, 3, 4})}}, {5, 3});
  // other leaves go to every set as they are: the Mixer checks that 'c' is still None
  ValueDict with_none = as_dict;
  with_none.set("c", Value());
  with_none.set("note", "text");
  const std::vector<std::pair<Value, int64_t>> inputs = {{Value(as_dict), 0},
                                                         {Value(with_none), 0},
                                                         {Value(ValueList{a, b}), 0},
                                                         {Value(as_td), 1},
                                                         {Value(as_td), -1}};
  for (const auto& [input, dim] : inputs)
    for (bool loop : {false, true})
      for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{2}}) {
        CAPTURE(input.kind_name());
        CAPTURE(loop);
        Value out = functional_vmap(*mods[0], {.params = params,
                                               .kwargs = {{"input", input}},
                                               .in_dims = {{"input", dim}},
                                               .chunk_size = c,
                                               .loop = loop});
        CHECK(close(out.tensor(), expected, 1e-6));
      }
  // an input with no Tensor in it has no dim to split; a TensorDict needs the sets in its batch
  ValueDict no_tensor;
  no_tensor.set("b", 2.0);
  no_tensor.set("c", Value());
  for (const Value& bad : {Value(2.0), Value(no_tensor), Value(), Value(ValueList{})}) {
    CHECK_THROWS_AS(
        functional_vmap(*mods[0],
                        {.params = params, .kwargs = {{"input", bad}}, .in_dims = {{"input", 0}}}),
        ValueError);
  }
  std::string m = message_of([&] {
    functional_vmap(
        *mods[0], {.params = params, .kwargs = {{"input", Value(2.0)}}, .in_dims = {{"input", 0}}});
  });
  CHECK(m.find("'input'") != std::string::npos);
  CHECK(m.find("[3]") != std::string::npos);
  for (int64_t dim : {0, 2}) {  // [5] at dim 0; no dim 2 in a batch of [5, 3]
    CHECK_THROWS_AS(functional_vmap(*mods[0], {.params = params,
                                               .kwargs = {{"input", as_td}},
                                               .in_dims = {{"input", dim}}}),
                    ValueError);
  }
}

TEST_CASE("modules without parameters: the sets come from params.batch_size") {
  std::vector<std::shared_ptr<nn::Module>> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(std::make_shared<nn::ReLU>());
  TensorDict params = TensorDict::from_modules(ids);
  REQUIRE(params.batch_size() == Shape{3});
  Tensor x = tensor({-1.0f, 2.0f, -3.0f, 4.0f}).view({2, 2});
  Tensor relu_x = tensor({0.0f, 2.0f, 0.0f, 4.0f}).view({2, 2});
  for (bool loop : {false, true}) {
    Value out = functional_vmap(*ids[0], {.params = params, .args = {x}, .loop = loop});
    REQUIRE(out.tensor().shape() == Shape{3, 2, 2});
    for (int i = 0; i < 3; ++i) CHECK(equal(out.tensor().select(0, i), relu_x));
  }
  // per-set inputs too
  Tensor xs = randn({3, 2, 2});
  Value out = functional_vmap(
      *ids[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}});
  CHECK(equal(out.tensor(), relu(xs)));
}

TEST_CASE("a failed call leaves the random generator where it was") {
  auto make = [] {
    // dropout draws, then the last Linear (7 features in) meets 6 and throws
    return std::shared_ptr<nn::Module>(
        std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::Dropout>(0.5),
            std::make_shared<nn::Linear>(7, 2)}));
  };
  auto nets = ensemble(4, make);
  for (auto& n : nets) n->train();
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({5, 4});
  manual_seed(11);
  Tensor expected = rand({8});
  for (bool loop : {false, true})
    for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{3}}) {
      manual_seed(11);
      CHECK_THROWS_AS(functional_vmap(*nets[0], {.params = params,
                                                 .args = {x},
                                                 .randomness = Randomness::Different,
                                                 .chunk_size = c,
                                                 .loop = loop}),
                      ValueError);
      CHECK(equal(rand({8}), expected));
    }
}

TEST_CASE(
    "a write into a leaf every set shares raises, batched or in a loop, and changes nothing") {
  manual_seed(12);
  auto bn = std::make_shared<nn::BatchNorm1d>(2);
  bn->train();
  std::vector<std::shared_ptr<nn::Module>> same(3, bn);
  TensorDict params = TensorDict::from_modules(same, {.expand_identical = true});
  REQUIRE(params.get("running_mean").stride(0) == 0);
  TensorDict before = params.clone();
  Tensor xs = randn({3, 4, 2});
  for (bool loop : {false, true}) {
    CAPTURE(loop);
    std::string m = message_of([&] {
      functional_vmap(
          *bn,
          {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = loop});
    });
    // the loop names the key it compared; the batched call, the in-place op that met the
    // expanded tensor and the shared buffers (not the shared weight and bias, which no set writes)
    CHECK(m.find(loop ? "'running_mean' of shape [2]" : "cannot write into an expanded tensor") !=
          std::string::npos);
    if (!loop)
      CHECK(m.find("clone it first: params' 'running_mean', 'running_var', 'num_batches_tracked' "
                   "are shared by every set (stacked with stride 0") != std::string::npos);
    CHECK_THROWS_AS(
        functional_vmap(
            *bn,
            {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = loop}),
        RuntimeError);
    for (const auto& [key, t] : params.leaves()) CHECK(equal(t, before.get(key)));
  }
  // in eval mode nothing is written: the shared leaves are fine
  bn->eval();
  Value out = functional_vmap(
      *bn, {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", 0}}, .loop = true});
  CHECK(out.tensor().shape() == Shape{3, 4, 2});
}

TEST_CASE("two batch dims: negative in_dims, unbatched outputs expanded, empty batches") {
  manual_seed(13);
  auto nets = ensemble(6, [] { return mlp(3, 4, 2); });
  TensorDict params = TensorDict::from_modules(nets).reshape({2, 3});
  // sets at dims 1, 2 of [5, 2, 3, 3], named by -3
  Tensor xs = randn({5, 2, 3, 3});
  Value out = functional_vmap(
      *nets[0], {.params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", -3}}});
  REQUIRE(out.tensor().shape() == Shape{2, 3, 5, 2});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      auto guard = params[i][j].to_module(*nets[0]);
      Tensor ref = (*nets[0])({xs.select(1, i).select(1, j)}).tensor();
      CHECK(close(out.tensor().select(0, i).select(0, j), ref));
    }
  // an output leaf that does not depend on the sets gets the batch dims too
  std::vector<std::shared_ptr<Mixer>> mods;
  for (int i = 0; i < 6; ++i) mods.push_back(std::make_shared<Mixer>());
  TensorDict mp = TensorDict::from_modules(mods).reshape({2, 3});
  Tensor b = randn({4});
  for (bool loop : {false, true}) {
    Value o = functional_vmap(
        *mods[0], {.params = mp, .args = {Value(ValueList{zeros({4}), b})}, .loop = loop});
    REQUIRE(o.tensor().shape() == Shape{2, 3, 4});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) CHECK(equal(o.tensor().select(0, i).select(0, j), b));
  }
  // a batch of size 0 with a per-set input
  TensorDict none = TensorDict::from_modules(nets).slice(0, 0);
  for (bool loop : {false, true}) {
    Value o = functional_vmap(*nets[0], {.params = none,
                                         .kwargs = {{"input", randn({0, 5, 3})}},
                                         .in_dims = {{"input", 0}},
                                         .loop = loop});
    CHECK(o.tensor().shape() == Shape{0, 5, 2});
  }
}

namespace {
// forward(input) = input * weight, counting its calls.
struct Counted : nn::Module {
  nn::Param weight;
  int calls = 0;
  Counted() {
    weight = register_parameter("weight", randn({4}));
    register_method("forward", &Counted::forward, {"input"});
  }
  std::string type_name() const override { return "Counted"; }
  Tensor forward(const Tensor& input) {
    ++calls;
    return input * weight.get();
  }
};
}  // namespace

TEST_CASE("chunk_size is the number of sets computed at once: one module call per chunk") {
  manual_seed(14);
  std::vector<std::shared_ptr<Counted>> mods;
  for (int i = 0; i < 7; ++i) mods.push_back(std::make_shared<Counted>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor x = randn({2, 4});
  Tensor reference =
      functional_vmap(*mods[0], {.params = params, .args = {x}, .loop = true}).tensor();
  CHECK(mods[0]->calls == 7);
  // chunks of c sets: ceil(7 / c) calls; no chunk_size: one call for this small ensemble
  for (auto [c, calls] : std::vector<std::pair<std::optional<int64_t>, int>>{
           {std::nullopt, 1}, {1, 7}, {3, 3}, {7, 1}, {100, 1}}) {
    mods[0]->calls = 0;
    Tensor out =
        functional_vmap(*mods[0], {.params = params, .args = {x}, .chunk_size = c}).tensor();
    CHECK(mods[0]->calls == calls);
    CHECK(equal(out, reference));
  }
}

TEST_CASE("randomness 'different' over two batch dims: set (i, j) draws as flat set 3i + j") {
  auto nets = ensemble(6, [] { return mlp(5, 16, 3, 0.5); });
  for (auto& n : nets) n->train();
  TensorDict flat = TensorDict::from_modules(nets);
  TensorDict grid = flat.reshape({2, 3});
  Tensor x = randn({4, 5});
  auto run = [&](const TensorDict& p, std::optional<int64_t> c, bool loop) {
    manual_seed(21);
    return functional_vmap(*nets[0], {.params = p,
                                      .args = {x},
                                      .randomness = Randomness::Different,
                                      .chunk_size = c,
                                      .loop = loop})
        .tensor();
  };
  Tensor base = run(flat, std::nullopt, false);  // [6, 4, 3]
  for (std::optional<int64_t> c : {std::optional<int64_t>{}, std::optional<int64_t>{4}})
    for (bool loop : {false, true}) {
      Tensor g = run(grid, c, loop);
      REQUIRE(g.shape() == Shape{2, 3, 4, 3});
      CHECK(equal(g.reshape({6, 4, 3}), base));
    }
}

TEST_CASE("method with per-set keyword inputs, batched and in a loop") {
  manual_seed(15);
  std::vector<std::shared_ptr<Scaler>> mods;
  for (int i = 0; i < 3; ++i) mods.push_back(std::make_shared<Scaler>());
  TensorDict params = TensorDict::from_modules(mods);
  Tensor xs = randn({2, 3, 3});  // the sets at dim 1
  for (bool loop : {false, true}) {
    Value out = functional_vmap(*mods[0], {.params = params,
                                           .kwargs = {{"input", xs}, {"factor", 3.0}},
                                           .in_dims = {{"input", 1}},
                                           .method = "scaled",
                                           .loop = loop});
    REQUIRE(out.tensor().shape() == Shape{3, 2, 3});
    for (int i = 0; i < 3; ++i) {
      auto w = mods[i]->weight.get().to_vector<float>();
      auto xi = xs.select(1, i).contiguous().to_vector<float>();
      auto oi = out.tensor().select(0, i).contiguous().to_vector<float>();
      for (int n = 0; n < 2; ++n)
        for (int k = 0; k < 3; ++k)
          CHECK(oi[n * 3 + k] == doctest::Approx(xi[n * 3 + k] * w[k] * 3.0));
    }
  }
}

TEST_CASE("an in_dims of INT64_MAX is a ValueError, not an overflow") {
  auto net = std::make_shared<nn::Linear>(3, 1);
  TensorDict params = TensorDict::from_modules(
      std::vector<std::shared_ptr<nn::Module>>{net, std::make_shared<nn::Linear>(3, 1)});
  test::check_throws_naming_op<ValueError>(
      [&] {
        nn::functional_vmap(*net, {.params = params,
                                   .kwargs = {{"input", randn({2, 3})}},
                                   .in_dims = {{"input", INT64_MAX}}});
      },
      "functional_vmap");
}

TEST_CASE("a conv ensemble on a shared input: the same bits for any chunk_size or a loop") {
  // one GEMM of B*O rows rounds differently from one of O rows, so the sets' values depended on
  // how many were computed at once
  manual_seed(31);
  auto nets = ensemble(5, [] { return std::make_shared<nn::Conv2d>(2, 4, 3); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({3, 2, 8, 8});
  Tensor base = functional_vmap(m, {.params = params, .args = {x}}).tensor();
  REQUIRE(base.shape() == Shape{5, 3, 4, 6, 6});
  for (int i = 0; i < 5; ++i) CHECK(close(base[i], (*nets[i])({x}).tensor(), 1e-5));
  for (int64_t c : {1, 2, 3, 4, 5, 9})
    CHECK(
        equal(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(), base));
  CHECK(equal(functional_vmap(m, {.params = params, .args = {x}, .loop = true}).tensor(), base));
}

TEST_CASE("a conv ensemble on per-set inputs: the same bits for any chunk_size or a loop") {
  // vmap folds the sets into groups; the kernel makes their columns a block of groups at a
  // time (each set's are 36 x 2048 floats, 288 KB: blocks of 3), which must not change a bit
  manual_seed(33);
  auto nets = ensemble(7, [] { return std::make_shared<nn::Conv2d>(4, 5, 3, 1, 1); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor xs = randn({7, 2, 4, 32, 32});
  auto run = [&](std::optional<int64_t> c, bool loop) {
    return functional_vmap(m, {.params = params,
                               .kwargs = {{"input", xs}},
                               .in_dims = {{"input", 0}},
                               .chunk_size = c,
                               .loop = loop})
        .tensor();
  };
  Tensor base = run(std::nullopt, false);
  REQUIRE(base.shape() == Shape{7, 2, 5, 32, 32});
  for (int i : {0, 6}) CHECK(close(base[i], (*nets[i])({xs[i]}).tensor(), 1e-5));
  for (int64_t c : {1, 2, 7}) CHECK(equal(run(c, false), base));
  CHECK(equal(run(std::nullopt, true), base));
}

TEST_CASE("two threads: a conv ensemble's blocks give the bits of one thread") {
  // the blocks' GEMMs ran on OpenBLAS's threads too, which split them differently
  manual_seed(32);
  auto nets = ensemble(64, [] { return std::make_shared<nn::Conv2d>(8, 8, 3, 1, 1); });
  TensorDict params = TensorDict::from_modules(nets);
  Tensor x = randn({4, 8, 16, 16});
  Tensor one = functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor();
  Tensor two;
  {
    Threads threads(2);
    two = functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor();
  }
  CHECK(equal(two, one));
  for (int i : {0, 63}) CHECK(close(one[i], (*nets[i])({x}).tensor(), 1e-5));
}

TEST_CASE("a grouped conv ensemble on a shared input, and batched again by an outer vmap") {
  manual_seed(32);
  auto nets = ensemble(4, [] { return std::make_shared<nn::Conv2d>(4, 6, 3, 1, 1, 1, 2); });
  TensorDict params = TensorDict::from_modules(nets);
  nn::Module& m = *nets[0];
  Tensor x = randn({2, 4, 5, 5});
  Tensor base = functional_vmap(m, {.params = params, .args = {x}}).tensor();
  REQUIRE(base.shape() == Shape{4, 2, 6, 5, 5});
  for (int i = 0; i < 4; ++i) CHECK(equal(base[i], (*nets[i])({x}).tensor()));
  for (int64_t c : {1, 3})
    CHECK(
        equal(functional_vmap(m, {.params = params, .args = {x}, .chunk_size = c}).tensor(), base));
  // the inner call's filter banks meet an input batched at the outer level
  Tensor xs = randn({3, 2, 4, 5, 5});
  auto outer = vmap(
      [&](Tensor xa) { return functional_vmap(m, {.params = params, .args = {xa}}).tensor(); });
  Tensor ys = outer(xs);
  REQUIRE(ys.shape() == Shape{3, 4, 2, 6, 5, 5});
  for (int a = 0; a < 3; ++a)
    for (int i = 0; i < 4; ++i) CHECK(close(ys[a][i], (*nets[i])({xs[a]}).tensor(), 1e-5));
  OpAttrs bad;
  bad.sets = 4;
  CHECK_THROWS_WITH_AS(call_op1(OpId::conv2d, {x, ones({6, 2, 3, 3})}, bad),
                       doctest::Contains("do not split into 4 sets"), ValueError);
}
