// RNN, LSTM and GRU against PyTorch 1.13 (golden files tests/data/modules/recurrent_*, written by
// tests/golden/make_recurrent_golden.py): every argument, single and stacked under functional_vmap,
// the bit-for-bit guarantees of dropout between layers, the kernels per step, and errors.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/dispatch.h"
#include "engine/engine.h"
#include "engine/parallel.h"
#include "modules/modules.h"
#include "modules/recurrent.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// Loads recurrent_<name>, runs m on its input (and h0/c0 when present), checks every result.
void check_single(nn::Module& m, const std::string& name) {
  CAPTURE(name);
  TensorDict g = golden("recurrent_" + name);
  auto guard = g.get_dict("module").to_module(m);
  m.eval();
  ValueList args{g.get("input")};
  if (g.contains("c0"))
    args.push_back(Value(ValueList{g.get("h0"), g.get("c0")}));
  else if (g.contains("h0"))
    args.push_back(g.get("h0"));
  Value r = m(args);
  REQUIRE(r.is_list());
  check_close(r[0].tensor(), g.get("output"), "output");
  if (g.contains("c_n")) {
    check_close(r[1][0].tensor(), g.get("h_n"), "h_n");
    check_close(r[1][1].tensor(), g.get("c_n"), "c_n");
  } else {
    check_close(r[1].tensor(), g.get("h_n"), "h_n");
  }
}

// Stacked golden: functional_vmap over params.* with input (and h0) shared or per set.
void check_stacked(nn::Module& m, const std::string& name, bool per_set) {
  CAPTURE(name);
  TensorDict g = golden("recurrent_stacked_" + name);
  TensorDict params = g.get_dict("params").clone();
  params.set_batch_size({params.leaves().front().second.size(0)});
  ValueDict kwargs{{"input", g.get("input")}};
  std::map<std::string, int64_t> in_dims;
  if (per_set) in_dims["input"] = 0;
  if (g.contains("h0")) {
    kwargs.set("hx", g.get("h0"));
    in_dims["hx"] = 0;
  }
  m.eval();
  for (bool loop : {false, true}) {
    CAPTURE(loop);
    Value r = nn::functional_vmap(
        m, {.params = params, .kwargs = kwargs, .in_dims = in_dims, .loop = loop});
    check_close(r[0].tensor(), g.get("output"), "output");
    const Value& h = r[1];
    check_close((h.is_list() ? h[0] : h).tensor(), g.get("h_n"), "h_n");
    if (g.contains("c_n")) check_close(h[1].tensor(), g.get("c_n"), "c_n");
  }
}

std::vector<Tensor> leaves(const Value& v) {
  std::vector<Tensor> out;
  if (v.is_tensor()) return {v.tensor()};
  for (const auto& item : v.list())
    for (const auto& t : leaves(item)) out.push_back(t);
  return out;
}

bool same_bits(const Value& a, const Value& b) {
  auto la = leaves(a), lb = leaves(b);
  if (la.size() != lb.size()) return false;
  for (size_t i = 0; i < la.size(); ++i)
    if (la[i].shape() != lb[i].shape() || la[i].to_vector<float>() != lb[i].to_vector<float>())
      return false;
  return true;
}

}  // namespace

TEST_CASE("golden: RNN (tanh, relu, bias, batch_first, bidirectional, unbatched, h0)") {
  nn::RNN tanh2(4, 5, 2);
  check_single(tanh2, "rnn_tanh");
  nn::RNN relu(4, 5, 1, "relu", false, true, 0.0, true);
  check_single(relu, "rnn_relu");
  nn::RNN unbatched(4, 3, 2, "tanh", true, false, 0.0, true);
  check_single(unbatched, "rnn_unbatched");
}

TEST_CASE("golden: LSTM (layers, batch_first, proj_size, bidirectional, unbatched, states)") {
  nn::LSTM lstm(4, 6, 2, true, true);
  check_single(lstm, "lstm");
  nn::LSTM plain(4, 6);
  check_single(plain, "lstm_no_state");
  nn::LSTM proj(4, 6, 2, true, false, 0.0, true, 3);
  check_single(proj, "lstm_proj");
  nn::LSTM unbatched(4, 5, 1, false, false, 0.0, false, 2);
  check_single(unbatched, "lstm_unbatched");
  nn::LSTM dropout_eval(4, 5, 3, true, false, 0.4);  // eval: no dropout between layers
  check_single(dropout_eval, "lstm_dropout_eval");
}

TEST_CASE("golden: GRU (layers, bidirectional, batch_first, no bias, unbatched, h0)") {
  nn::GRU gru(4, 5, 2, true, true, 0.0, true);
  check_single(gru, "gru");
  nn::GRU unbatched(4, 6, 1, false);
  check_single(unbatched, "gru_unbatched");
}

TEST_CASE("golden: stacked RNN, LSTM and GRU under functional_vmap, loop and batched") {
  nn::LSTM lstm(4, 6, 2, true, true);
  check_stacked(lstm, "lstm", false);
  nn::GRU gru(4, 5, 1, true, true, 0.0, true);
  check_stacked(gru, "gru_per_set", true);
  nn::RNN rnn(4, 5, 1, "relu");
  check_stacked(rnn, "rnn", false);
}

TEST_CASE("recurrent parameters have torch's names, order and shapes") {
  // torch.nn.LSTM(4, 6, num_layers=2, proj_size=3, bidirectional=True).named_parameters()
  const std::vector<std::pair<std::string, Shape>> want = {{"weight_ih_l0", {24, 4}},
                                                           {"weight_hh_l0", {24, 3}},
                                                           {"bias_ih_l0", {24}},
                                                           {"bias_hh_l0", {24}},
                                                           {"weight_hr_l0", {3, 6}},
                                                           {"weight_ih_l0_reverse", {24, 4}},
                                                           {"weight_hh_l0_reverse", {24, 3}},
                                                           {"bias_ih_l0_reverse", {24}},
                                                           {"bias_hh_l0_reverse", {24}},
                                                           {"weight_hr_l0_reverse", {3, 6}},
                                                           {"weight_ih_l1", {24, 6}},
                                                           {"weight_hh_l1", {24, 3}},
                                                           {"bias_ih_l1", {24}},
                                                           {"bias_hh_l1", {24}},
                                                           {"weight_hr_l1", {3, 6}},
                                                           {"weight_ih_l1_reverse", {24, 6}},
                                                           {"weight_hh_l1_reverse", {24, 3}},
                                                           {"bias_ih_l1_reverse", {24}},
                                                           {"bias_hh_l1_reverse", {24}},
                                                           {"weight_hr_l1_reverse", {3, 6}}};
  nn::LSTM lstm(4, 6, 2, true, false, 0.0, true, 3);
  auto got = lstm.named_parameters();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(got[i].first == want[i].first);
    CHECK(got[i].second.shape() == want[i].second);
    // U(-1/sqrt(hidden), 1/sqrt(hidden))
    CHECK(max(got[i].second.abs()).item<double>() <= 1.0 / std::sqrt(6.0));
  }
  nn::GRU gru(3, 2, 1, false);
  auto g = gru.named_parameters();
  REQUIRE(g.size() == 2);
  CHECK(g[0].first == "weight_ih_l0");
  CHECK(g[0].second.shape() == Shape{6, 3});
  CHECK(g[1].second.shape() == Shape{6, 2});
  std::ostringstream os;
  os << nn::LSTM(4, 6, 2, true, false, 0.25, true, 3);
  CHECK(os.str() == "LSTM(4, 6, proj_size=3, num_layers=2, dropout=0.25, bidirectional=True)");
}

TEST_CASE("recurrent dropout between layers: same bits for any chunk_size, loop and threads") {
  manual_seed(3);
  std::vector<std::shared_ptr<nn::Module>> nets;
  for (int i = 0; i < 5; ++i)
    nets.push_back(std::make_shared<nn::LSTM>(4, 6, 3, true, true, 0.5, true));
  TensorDict params = TensorDict::from_modules(nets);
  const Tensor x = randn({2, 7, 4});
  auto call = [&](std::optional<int64_t> chunk, bool loop) {
    manual_seed(11);
    return nn::functional_vmap(*nets[0], {.params = params,
                                          .args = {x},
                                          .randomness = Randomness::Different,
                                          .chunk_size = chunk,
                                          .loop = loop});
  };
  const Value all = call(std::nullopt, false);
  // dropout acted: the sets' outputs differ from eval mode's
  nets[0]->eval();
  const Value eval = call(std::nullopt, false);
  nets[0]->train();
  CHECK_FALSE(same_bits(all, eval));
  for (int64_t chunk : {1, 2, 3}) {
    CAPTURE(chunk);
    CHECK(same_bits(call(chunk, false), all));
  }
  CHECK(same_bits(call(std::nullopt, true), all));
  const int threads = configured_threads();
  set_num_threads(2);
  const Value two = call(std::nullopt, false);
  const Value two_chunked = call(1, false);
  set_num_threads(threads);
  CHECK(same_bits(two, all));
  CHECK(same_bits(two_chunked, all));
}

TEST_CASE("vmapped LSTM and GRU run as many kernels for 2 sets as for 16") {
  for (const char* kind : {"LSTM", "GRU"}) {
    CAPTURE(kind);
    auto count = [&](int sets, int64_t steps) {
      std::vector<std::shared_ptr<nn::Module>> nets;
      for (int i = 0; i < sets; ++i)
        nets.push_back(std::string(kind) == "LSTM"
                           ? std::shared_ptr<nn::Module>(std::make_shared<nn::LSTM>(8, 16, 2))
                           : std::make_shared<nn::GRU>(8, 16, 2));
      TensorDict params = TensorDict::from_modules(nets);
      const Tensor x = randn({steps, 3, 8});
      reset_kernel_counts();
      nn::functional_vmap(*nets[0], {.params = params, .args = {x}, .chunk_size = sets});
      int64_t all = 0;
      for (int k = 0; k < static_cast<int>(KernelKind::kCount); ++k)
        all += kernel_count(static_cast<KernelKind>(k));
      return std::pair{all, kernel_count(KernelKind::Gemm)};
    };
    const auto [few, few_gemm] = count(2, 5);
    const auto [many, many_gemm] = count(16, 5);
    CHECK(few == many);
    CHECK(few_gemm == many_gemm);
    // per layer: one product for every step's input, then one per step
    CHECK(many_gemm == 2 * (1 + 5));
    // a longer sequence adds the same kernels per step whatever the number of sets
    const auto [longer, longer_gemm] = count(16, 9);
    CHECK(count(2, 9).first == longer);
    CHECK(longer > many);
    CHECK(longer_gemm == 2 * (1 + 9));
  }
}

TEST_CASE("recurrent modules reject bad arguments and inputs, naming the module and shapes") {
  check_throws_mentioning<ValueError>([] { nn::LSTM(4, 6, 1, true, false, 0.0, false, 6); },
                                      "proj_size (6) has to be smaller than hidden_size (6)");
  check_throws_naming_op<ValueError>([] { nn::GRU(4, 0); }, "GRU");
  check_throws_naming_op<ValueError>([] { nn::RNN(4, 5, 1, "sigmoid"); }, "RNN");
  check_throws_naming_op<ValueError>([] { nn::LSTM(4, 5, 2, true, false, 1.5); }, "LSTM");
  nn::LSTM lstm(4, 6, 2);
  check_throws_mentioning<ValueError>([&] { lstm({randn({3})}); },
                                      "[LSTM] expected input to be 2-D or 3-D, got shape [3]");
  check_throws_mentioning<ValueError>([&] { lstm({randn({5, 3, 2, 4})}); }, "[5, 3, 2, 4]");
  check_throws_mentioning<ValueError>([&] { lstm({randn({5, 3, 7})}); }, "[5, 3, 7]");
  check_throws_mentioning<ValueError>([&] { lstm({randn({0, 3, 4})}); }, "[0, 3, 4]");
  check_throws_mentioning<TypeError>(
      [&] {
        lstm({randn({5, 3, 4}), randn({2, 3, 6})});
      },
      "tuple (h_0, c_0)");
  check_throws_mentioning<ValueError>(
      [&] {
        lstm({randn({5, 3, 4}), Value(ValueList{randn({2, 3, 6}), randn({2, 2, 6})})});
      },
      "expected c_0 of shape [2, 3, 6] for input [5, 3, 4], got [2, 2, 6]");
  check_throws_mentioning<ValueError>(
      [&] {
        lstm({randn({5, 4}), Value(ValueList{randn({2, 1, 6}), randn({2, 1, 6})})});
      },
      "expected h_0 of shape [2, 6] for input [5, 4], got [2, 1, 6]");
  nn::GRU gru(4, 6);
  check_throws_mentioning<TypeError>(
      [&] {
        gru({randn({5, 3, 4}), randn({1, 3, 6}, kFloat64)});
      },
      "same dtype");
  check_throws_mentioning<TypeError>(
      [&] {
        gru({full({5, 3, 4}, 1, kInt64)});
      },
      "[GRU] input must be floating point");
  // under functional_vmap the failing call names the per-set shape
  std::vector<std::shared_ptr<nn::Module>> nets{std::make_shared<nn::GRU>(4, 6),
                                                std::make_shared<nn::GRU>(4, 6)};
  TensorDict params = TensorDict::from_modules(nets);
  check_throws_mentioning<ValueError>(
      [&] {
        nn::functional_vmap(*nets[0], {.params = params,
                                       .kwargs = {{"input", randn({2, 5, 3, 7})}},
                                       .in_dims = {{"input", 0}}});
      },
      "[5, 3, 7]");
}

TEST_CASE("lstm_pointwise and gru_pointwise agree with the unfused ops, broadcast and check") {
  const int64_t H = 19;  // not a multiple of any vector width: every row has a tail
  for (DType dt : {kFloat32, kFloat64}) {
    CAPTURE(dtype_name(dt));
    const Tensor gx = (randn({3, 4 * H}) * 2).to(dt), gh = randn({3, 4 * H}).to(dt);
    const Tensor c = randn({H}).to(dt);  // one state for every row
    auto [h, c2] = lstm_pointwise(gx, gh, c);
    const Tensor g = gx + gh;
    auto part = [&](int64_t i) { return g.slice(-1, i * H, (i + 1) * H); };
    const Tensor want_c = part(1).sigmoid() * c + part(0).sigmoid() * part(2).tanh();
    const Tensor want_h = part(3).sigmoid() * want_c.tanh();
    CHECK(allclose(c2, want_c, 1e-6, 1e-6));
    CHECK(allclose(h, want_h, 1e-6, 1e-6));
    CHECK(h.shape() == Shape{3, H});

    const Tensor rx = randn({2, 1, 3 * H}).to(dt), rh = randn({4, 3 * H}).to(dt);
    const Tensor state = randn({2, 4, H}).to(dt);
    const Tensor got = gru_pointwise(rx, rh, state);
    auto px = [&](int64_t i) { return rx.slice(-1, i * H, (i + 1) * H); };
    auto ph = [&](int64_t i) { return rh.slice(-1, i * H, (i + 1) * H); };
    const Tensor r = (px(0) + ph(0)).sigmoid(), z = (px(1) + ph(1)).sigmoid();
    const Tensor n = (px(2) + r * ph(2)).tanh();
    CHECK(got.shape() == Shape{2, 4, H});
    CHECK(allclose(got, n + z * (state - n), 1e-6, 1e-6));
  }
  check_throws_mentioning<ValueError>(
      [] { lstm_pointwise(randn({2, 12}), randn({2, 12}), randn({2, 4})); },
      "[lstm_pointwise] expects gates [..., 4 * H] and a state [..., H], got shapes [2, 12], "
      "[2, 12] and [2, 4]");
  check_throws_mentioning<TypeError>(
      [] { gru_pointwise(randn({6}), randn({6}), randn({2}, kFloat64)); }, "one dtype");
  check_throws_naming_op<ValueError>(
      [] { gru_pointwise(randn({2, 6}), randn({3, 6}), randn({2})); }, "gru_pointwise");
}
