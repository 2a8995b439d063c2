#pragma once
// Helpers shared by the functional_vmap test files: small ensembles and the reference each set
// is checked against (its parameters put into the module with to_module, the module called
// plainly, the results stacked).
#include <doctest/doctest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

namespace td::test {

inline std::shared_ptr<nn::Module> mlp(int64_t in, int64_t hidden, int64_t out, double p = 0) {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(in, hidden));
  seq->push_back(std::make_shared<nn::ReLU>());
  if (p > 0) seq->push_back(std::make_shared<nn::Dropout>(p));
  seq->push_back(std::make_shared<nn::Linear>(hidden, out));
  return seq;
}

inline std::vector<std::shared_ptr<nn::Module>> ensemble(
    int n, std::function<std::shared_ptr<nn::Module>()> make) {
  std::vector<std::shared_ptr<nn::Module>> out;
  for (int i = 0; i < n; ++i) out.push_back(make());
  return out;
}

// Options of a call on params whose input is shared (x) or per set at dim 0 (xs).
inline nn::FunctionalVmapOptions shared_or_per_set(const TensorDict& params, Randomness r,
                                                   bool per_set, const Tensor& x,
                                                   const Tensor& xs) {
  nn::FunctionalVmapOptions o{.params = params, .randomness = r};
  if (per_set) {
    o.kwargs.set("input", xs);
    o.in_dims = {{"input", 0}};
  } else {
    o.args = {x};
  }
  return o;
}

// Reference: set i computed alone, params put into the module by to_module.
inline Tensor loop_reference(nn::Module& m, const TensorDict& params, const ValueList& args,
                             const ValueDict& kwargs,
                             const std::map<std::string, int64_t>& per_set) {
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < params.batch_size()[0]; ++i) {
    auto guard = params[i].to_module(m);
    ValueDict kw = kwargs;
    for (const auto& [k, d] : per_set) kw.set(k, kwargs.at(k).tensor().select(d, i));
    outs.push_back(m(args, kw).tensor());
  }
  return stack(outs, 0);
}

inline bool close(const Tensor& a, const Tensor& b, double rtol = 1e-6) {
  return a.shape() == b.shape() && allclose(a, b, rtol, 1e-6);
}

// functional_vmap(m, o) gives whole's bits with each chunk size and with loop = true.
inline void check_same_bits_chunked_and_looped(const nn::Module& m,
                                               const nn::FunctionalVmapOptions& o,
                                               const Tensor& whole,
                                               std::vector<int64_t> chunk_sizes) {
  for (int64_t c : chunk_sizes) {
    CAPTURE(c);
    auto chunked = o;
    chunked.chunk_size = c;
    CHECK(equal(nn::functional_vmap(m, chunked).tensor(), whole));
  }
  auto looped = o;
  looped.loop = true;
  CHECK(equal(nn::functional_vmap(m, looped).tensor(), whole));
}

// functional_vmap of m on a shared input x and on per-set inputs xs (the sets at dim set_dim):
// each equals the reference loop and gives its bits again chunked and looped.
inline void check_shared_and_per_set(nn::Module& m, const TensorDict& params, const Tensor& x,
                                     const Tensor& xs, int64_t set_dim,
                                     std::vector<int64_t> chunks) {
  const nn::FunctionalVmapOptions shared{.params = params, .args = {x}};
  const nn::FunctionalVmapOptions per_set{
      .params = params, .kwargs = {{"input", xs}}, .in_dims = {{"input", set_dim}}};
  for (const auto& o : {shared, per_set}) {
    const Tensor whole = nn::functional_vmap(m, o).tensor();
    CHECK(close(whole, loop_reference(m, params, o.args, o.kwargs, o.in_dims)));
    check_same_bits_chunked_and_looped(m, o, whole, chunks);
  }
}

// Restores one thread when a test ends, passing or not.
struct Threads {
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(1); }
};

}  // namespace td::test
