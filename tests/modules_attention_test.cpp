// MultiheadAttention against PyTorch 1.13 (golden files in tests/data/modules/): batch_first and
// sequence first, kdim, vdim, add_bias_kv, add_zero_attn; its parameters and errors; the fused
// self-attention projection.
#include "modules/modules.h"

#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

TEST_CASE("golden: MultiheadAttention (batch_first and sequence first)") {
  TensorDict g = golden("mha");
  auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true);
  auto guard = g.get_dict("module").to_module(*m);
  m->eval();
  Value r = (*m)({g.get("query"), g.get("key"), g.get("value")});
  check_close(r[0].tensor(), g.get("output"), "output");
  check_close(r[1].tensor(), g.get("weights"), "weights");
  Value rm = m->call_method(
      "forward", {g.get("query"), g.get("key"), g.get("value")},
      {{"key_padding_mask", g.get("key_padding_mask")}, {"average_attn_weights", false}});
  check_close(rm[0].tensor(), g.get("output_masked"), "masked output");
  check_close(rm[1].tensor(), g.get("weights_heads"), "per-head weights");
  Value nw = (*m)({g.get("query"), g.get("key"), g.get("value")}, {{"need_weights", false}});
  CHECK(nw[1].is_none());
  check_close(nw[0].tensor(), g.get("output"), "need_weights=False output");

  TensorDict g2 = golden("mha_seq_first");
  auto m2 = std::make_shared<nn::MultiheadAttention>(4, 4);
  auto guard2 = g2.get_dict("module").to_module(*m2);
  Value r2 = (*m2)({g2.get("query"), g2.get("key"), g2.get("value")});
  check_close(r2[0].tensor(), g2.get("output"), "seq-first output");
  check_close(r2[1].tensor(), g2.get("weights"), "seq-first weights");
  // unbatched input [L, E] gives the batched result's first row
  Value u = (*m2)(
      {g2.get("query").select(1, 0), g2.get("key").select(1, 0), g2.get("value").select(1, 0)});
  check_close(u[0].tensor(), g2.get("output").select(1, 0), "unbatched output");
  check_close(u[1].tensor(), g2.get("weights")[0], "unbatched weights");
}

TEST_CASE("golden: MultiheadAttention with kdim, vdim, add_bias_kv and add_zero_attn") {
  TensorDict g = golden("mha_options");
  struct Case {
    const char* name;
    int64_t heads;
    bool bias_kv, zero_attn;
  };
  for (const Case& c : {Case{"kv_dims", 2, false, false}, Case{"bias_kv", 4, true, false},
                        Case{"zero_attn", 2, false, true}, Case{"both", 2, true, true}}) {
    CAPTURE(c.name);
    auto m = std::make_shared<nn::MultiheadAttention>(8, c.heads, 0.0, true, true, c.bias_kv,
                                                      c.zero_attn, 5, 3);
    auto guard = g.get_dict(c.name).to_module(*m);
    m->eval();
    Value r = m->call_method("forward", {g.get("query"), g.get("key"), g.get("value")},
                             {{"key_padding_mask", g.get("key_padding_mask")},
                              {"attn_mask", g.get("attn_mask")},
                              {"average_attn_weights", false}});
    check_close(r[0].tensor(), g.get(std::string("output.") + c.name), "output");
    check_close(r[1].tensor(), g.get(std::string("weights.") + c.name), "weights");
  }
  auto same = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, false, true, true);
  auto guard = g.get_dict("same").to_module(*same);
  const Tensor qs = g.get("query_same");
  Value r = (*same)({qs, qs, qs});
  check_close(r[0].tensor(), g.get("output.same"), "sequence first, embed_dim keys");
  check_close(r[1].tensor(), g.get("weights.same"), "sequence first weights");
  // torch's parameter names and shapes
  std::vector<std::string> names;
  for (auto& [n, p] :
       nn::MultiheadAttention(8, 2, 0.0, true, false, true, false, 5, 3).named_parameters())
    names.push_back(n);
  CHECK(names == std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                          "in_proj_bias", "bias_k", "bias_v", "out_proj.weight",
                                          "out_proj.bias"});
  // a key of the wrong width names all three widths
  check_throws_mentioning<ValueError>(
      [&] {
        nn::MultiheadAttention m(8, 2, 0.0, true, true, false, false, 5, 3);
        m({g.get("query"), g.get("value"), g.get("value")});
      },
      "expected last dims 8 (query), 5 (key) and 3 (value)");
}

TEST_CASE("MultiheadAttention parameters and errors") {
  auto m = std::make_shared<nn::MultiheadAttention>(6, 3);
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias"});
  CHECK(m->in_proj_weight->shape() == Shape{18, 6});
  CHECK(m->in_proj_bias->to_vector<float>() == std::vector<float>(18, 0.f));
  CHECK(m->out_proj->bias->to_vector<float>() == std::vector<float>(6, 0.f));
  double bound = std::sqrt(6.0 / 24.0);
  for (float v : m->in_proj_weight->to_vector<float>()) CHECK(std::abs(v) <= bound);
  CHECK(m->method_arg_names("forward") ==
        std::vector<std::string>{"query", "key", "value", "key_padding_mask", "need_weights",
                                 "attn_mask", "average_attn_weights"});
  CHECK_THROWS_AS(nn::MultiheadAttention(6, 4), ValueError);
  CHECK_THROWS_AS(nn::MultiheadAttention(6, 3, 1.5), ValueError);
  Tensor q = zeros({2, 1, 6});
  CHECK_THROWS_AS((*m)({zeros({2, 1, 5}), zeros({2, 1, 5}), zeros({2, 1, 5})}), ValueError);
  CHECK_THROWS_AS((*m)({zeros({2, 1, 2, 6}), q, q}), ValueError);
  CHECK_THROWS_AS((*m)({q, zeros({2, 6}), q}), ValueError);
  // a mask that is neither a tensor nor None is named (it was Value's bare kind error)
  check_throws_mentioning<TypeError>(
      [&] {
        (*m)({q, q, q}, {{"attn_mask", 1.0}});
      },
      "[MultiheadAttention] attn_mask must be a Tensor or None, not float");
  check_throws_mentioning<TypeError>(
      [&] {
        (*m)({q, q, q}, {{"key_padding_mask", "x"}});
      },
      "key_padding_mask must be a Tensor or None, not str");
  CHECK_THROWS_AS((*m)({q, q, q}, {{"attn_mask", zeros({3, 3})}}), ValueError);
  CHECK_THROWS_AS((*m)({q, q, q}, {{"key_padding_mask", zeros({1, 3})}}), ValueError);
  CHECK(has(message_of([&] {
              (*m)({q, q, q}, {{"attn_mask", zeros({3, 3})}});
            }),
            "MultiheadAttention"));
  // an attention mask that blocks key 1 leaves all weight on key 0
  Tensor mask = gt(tensor({0.f, 1.f, 0.f, 1.f}, {2, 2}), 0.5);
  Value r = (*m)({randn({2, 1, 6}), randn({2, 1, 6}), randn({2, 1, 6})}, {{"attn_mask", mask}});
  CHECK(r[1].tensor().to_vector<float>() == std::vector<float>{1, 0, 1, 0});
  // a float64 mask is taken in the query's dtype, as torch does: a float32 result
  Tensor q2 = randn({2, 1, 6});
  Value plain = (*m)({q2, q2, q2});
  Value with64 = (*m)({q2, q2, q2}, {{"attn_mask", zeros({2, 2}, kFloat64)}});
  CHECK(with64[0].tensor().dtype() == kFloat32);
  CHECK(with64[1].tensor().dtype() == kFloat32);
  CHECK(allclose(with64[0].tensor(), plain[0].tensor()));
}

TEST_CASE("MultiheadAttention's fused self-attention projection gives the three products' values") {
  for (bool batch_first : {true, false}) {
    auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, batch_first);
    Tensor b = m->in_proj_bias;
    copy_(b, randn({24}));
    const Tensor x = randn({3, 5, 8}), mask = randn({batch_first ? 5 : 3, batch_first ? 5 : 3});
    // one tensor three times takes the fused [3E, E] product; distinct ones the three [E, E] ones
    Value fused = (*m)({x, x, x}, {{"attn_mask", mask}});
    Value apart = (*m)({x, x.clone(), x.clone()}, {{"attn_mask", mask}});
    check_close(fused[0].tensor(), apart[0].tensor(), "output");
    check_close(fused[1].tensor(), apart[1].tensor(), "weights");
    Tensor u = x.select(0, 0);  // unbatched
    check_close((*m)({u, u, u})[0].tensor(), (*m)({u, u.clone(), u.clone()})[0].tensor(),
                "unbatched output");
  }
}

// The self-attention path (one [3E, E] product, only q's rows scaled) and the three products of
// distinct tensors compute the same dot products and scale q's weight alike: the same bits, with
// the weights averaged and per head, D = 16 (a power of 4) and D = 12. (Below 32 columns, an
// [E, E] product may take small_gemm's dot-product path, whose sums run in another order.)
TEST_CASE("MultiheadAttention's self-attention path has the bits of three distinct inputs") {
  for (auto [e, h] : {std::pair<int64_t, int64_t>{64, 4}, {48, 4}})
    for (bool average : {true, false}) {
      CAPTURE(e);
      CAPTURE(average);
      manual_seed(8);
      auto m = std::make_shared<nn::MultiheadAttention>(e, h, 0.0, true, true);
      Tensor b = m->in_proj_bias;
      copy_(b, randn({3 * e}));
      const Tensor x = randn({3, 11, e});
      const Value fused = (*m)({x, x, x}, {{"average_attn_weights", average}});
      const Value apart = (*m)({x, x.clone(), x.clone()}, {{"average_attn_weights", average}});
      CHECK(equal(fused[0].tensor(), apart[0].tensor()));
      CHECK(equal(fused[1].tensor(), apart[1].tensor()));
    }
}

// An ensemble of self-attentions (one tensor as query, key and value: the fused projection, q's
// scale in its weight, the products per head in td's own kernel), with the weights averaged and
// per head: the same bits for any chunk_size, a loop, and two threads; the values of each module
// called alone. D = 3 (a scale that is not a power of 2) and D = 4.
TEST_CASE("a self-attention ensemble: the same bits for any chunk_size, a loop or two threads") {
  for (auto [e, h] : {std::pair<int64_t, int64_t>{12, 4}, {16, 4}})
    for (bool average : {true, false}) {
      CAPTURE(e);
      CAPTURE(average);
      manual_seed(7);
      std::vector<std::shared_ptr<nn::Module>> nets;
      for (int i = 0; i < 5; ++i) {
        auto m = std::make_shared<nn::MultiheadAttention>(e, h, 0.0, true, true);
        Tensor b = m->in_proj_bias;
        copy_(b, randn({3 * e}));
        nets.push_back(m);
      }
      TensorDict params = TensorDict::from_modules(nets);
      const Tensor x = randn({3, 17, e});
      nn::FunctionalVmapOptions o{.params = params, .args = {x, x, x}};
      o.kwargs.set("average_attn_weights", average);
      const Value base = nn::functional_vmap(*nets[0], o);
      for (int i = 0; i < 5; ++i) {
        Value one = (*nets[i])({x, x, x}, {{"average_attn_weights", average}});
        CHECK(allclose(base[0].tensor()[i], one[0].tensor(), 1e-5, 1e-6));
        CHECK(allclose(base[1].tensor()[i], one[1].tensor(), 1e-5, 1e-6));
      }
      auto same = [&](const Value& r) {
        return equal(r[0].tensor(), base[0].tensor()) && equal(r[1].tensor(), base[1].tensor());
      };
      for (int64_t c : {1, 2, 3, 4}) {
        CAPTURE(c);
        nn::FunctionalVmapOptions oc = o;
        oc.chunk_size = c;
        CHECK(same(nn::functional_vmap(*nets[0], oc)));
      }
      nn::FunctionalVmapOptions ol = o;
      ol.loop = true;
      CHECK(same(nn::functional_vmap(*nets[0], ol)));
      set_num_threads(2);
      const Value two = nn::functional_vmap(*nets[0], o);
      set_num_threads(1);
      CHECK(same(two));
    }
}
