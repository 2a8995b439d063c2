// functional_vmap's blocks of sets: chunk_size, the blocks it picks without one, and blocks run
// at once on several threads.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;
using nn::functional_vmap;

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
// A user's module: its forward counts its calls, the threads they came from and the thread count
// its ops see. It may declare its forward safe to run on several threads at once: then inside a
// block of sets run at once its ops see one thread (the block's ops run serially), and it is
// called once per block.
struct Recorder : nn::Module {
  std::shared_ptr<nn::Linear> l1, l2;
  bool declares;
  std::mutex m;
  std::set<std::thread::id> threads;
  int calls = 0, max_threads_seen = 0;
  explicit Recorder(bool declares_safe = false) : declares(declares_safe) {
    l1 = register_module("l1", std::make_shared<nn::Linear>(128, 200));
    l2 = register_module("l2", std::make_shared<nn::Linear>(200, 10));
    register_method("forward", &Recorder::forward, {"input"});
  }
  std::string type_name() const override { return "Recorder"; }
  const std::type_info* concurrent_forward_class() const override {
    return declares ? &typeid(Recorder) : nullptr;
  }
  Tensor forward(const Tensor& input) {
    {
      std::lock_guard<std::mutex> lock(m);
      threads.insert(std::this_thread::get_id());
      ++calls;
      max_threads_seen = std::max(max_threads_seen, num_threads());
    }
    return l2->forward(relu(l1->forward(input)));
  }
};
}  // namespace

// Blocks of sets run at once only through modules that declare it: a user's module (which may
// keep state, as this one does) is called once, on the caller's thread, also inside a Sequential.
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

namespace {
// A user's class derived from td's Sequential, which declares itself: the declaration does not
// pass to the derived class.
struct DerivedSequential : nn::Sequential {
  using nn::Sequential::Sequential;
};
}  // namespace

// Blocks of sets run at once only where every module of the tree declares its exact class safe
// (Module::concurrent_forward_class): td's modules do, a user's module does not unless it says
// so, and a class derived from one of td's does not inherit it.
TEST_CASE("two threads: blocks run at once only through modules whose exact class declares it") {
  manual_seed(13);
  const Tensor x = randn({64, 128});
  auto run = [&](const std::function<std::shared_ptr<nn::Module>()>& make) {
    auto nets = ensemble(24, make);
    auto probe = std::dynamic_pointer_cast<Recorder>(nets[0]);
    if (!probe) probe = std::dynamic_pointer_cast<Recorder>(nets[0]->children()[0]);
    REQUIRE(probe);
    const TensorDict params = TensorDict::from_modules(nets);
    Threads t(2);
    Tensor y = functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor();
    CHECK(y.shape() == Shape{24, 64, 10});
    return probe;
  };
  using Make = std::function<std::shared_ptr<nn::Module>()>;
  auto in = [](auto tag, bool declares) -> Make {
    return [=] {
      using Container = typename decltype(tag)::type;
      return std::make_shared<Container>(
          std::vector<std::shared_ptr<nn::Module>>{std::make_shared<Recorder>(declares)});
    };
  };
  const std::type_identity<nn::Sequential> sequential;
  const std::type_identity<DerivedSequential> derived;
  // a user's module that declares itself: in blocks, alone and inside td's Sequential
  for (const Make& make :
       {Make([] { return std::make_shared<Recorder>(true); }), in(sequential, true)}) {
    auto probe = run(make);
    CHECK(probe->calls > 1);
    CHECK(probe->max_threads_seen == 1);
  }
  // one that does not, or the declaring one inside a class derived from Sequential: called
  // once, on the caller's two threads
  for (const Make& make : {Make([] { return std::make_shared<Recorder>(false); }),
                           in(sequential, false), in(derived, true)}) {
    auto probe = run(make);
    CHECK(probe->calls == 1);
    CHECK(probe->max_threads_seen == 2);
  }
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

TEST_CASE("progress: sets done after each chunk (each set in a loop), in order, ending at the total") {
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 7; ++i) nets.push_back(std::make_shared<nn::Linear>(3, 2));
  const TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({4, 3});
  const Tensor want = functional_vmap(*nets[0], {.params = params, .args = {x}}).tensor();
  auto calls_with = [&](std::optional<int64_t> chunk, bool loop, int threads) {
    std::vector<std::pair<int64_t, int64_t>> calls;
    std::mutex m;
    const int before = configured_threads();
    set_num_threads(threads);
    nn::FunctionalVmapOptions o{.params = params, .args = {x}, .chunk_size = chunk, .loop = loop};
    o.progress = [&](int64_t done, int64_t total) {
      std::lock_guard<std::mutex> lock(m);
      calls.emplace_back(done, total);
    };
    const Tensor got = functional_vmap(*nets[0], o).tensor();
    set_num_threads(before);
    CHECK(allclose(got, want, 0, 0));
    return calls;
  };
  using Calls = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(calls_with(3, false, 1) == Calls{{3, 7}, {6, 7}, {7, 7}});
  CHECK(calls_with(std::nullopt, false, 1) == Calls{{7, 7}});
  CHECK(calls_with(std::nullopt, true, 1) ==
        Calls{{1, 7}, {2, 7}, {3, 7}, {4, 7}, {5, 7}, {6, 7}, {7, 7}});
  // on two threads too, one call at a time, the count rising to the total
  const Calls two = calls_with(1, false, 2);
  REQUIRE(two.size() == 7);
  for (size_t i = 0; i < two.size(); ++i) CHECK(two[i] == std::pair<int64_t, int64_t>(i + 1, 7));
  // a callback that throws ends the call with its exception
  nn::FunctionalVmapOptions o{.params = params, .args = {x}, .chunk_size = 2};
  o.progress = [](int64_t done, int64_t) {
    if (done >= 4) throw ValueError("stop at 4");
  };
  check_throws_mentioning<ValueError>([&] { functional_vmap(*nets[0], o); }, "stop at 4");
}
