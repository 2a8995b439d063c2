#pragma once
// Strided iteration for the kernels of one level: operand strides read as broadcast, and a loop
// nest with size-1 dims dropped and mergeable dims merged (xtensor's generic stepper is slow on
// dynamic-rank views). For the kernel files only (TD_ISA names the level they are compiled for).
#include <array>

#include "engine/tensor.h"

namespace td::kernels::TD_ISA {
namespace {

// Strides of x (in elements) read as if broadcast to `shape` (stride 0 on new or size-1 dims).
inline Strides broadcast_strides(const Tensor& x, const Shape& shape) {
  const Shape& xs = x.shape();
  const Strides& xst = x.strides();
  size_t nd = shape.size(), off = nd - xs.size();
  Strides st(nd, 0);
  for (size_t i = 0; i < xs.size(); ++i) st[off + i] = xs[i] == 1 ? 0 : xst[i];
  return st;
}

// A loop nest over `shape` with N operands; size-1 dims are dropped and mergeable dims merged.
template <int N>
struct Nest {
  Shape shape;
  std::array<Strides, N> st;

  Nest(const Shape& s, std::array<Strides, N> strides) {
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] == 1) continue;
      bool merge = !shape.empty();
      for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][d] * s[d];
      if (merge) {
        shape.back() *= s[d];
        for (int k = 0; k < N; ++k) st[k].back() = strides[k][d];
      } else {
        shape.push_back(s[d]);
        for (int k = 0; k < N; ++k) st[k].push_back(strides[k][d]);
      }
    }
  }

  // Operand k's stride along the innermost (merged) dim; 1 for a scalar nest.
  int64_t inner_stride(int k) const { return shape.empty() ? 1 : st[k].back(); }

  // Calls f(offsets) for every element, in row-major order of the (merged) shape.
  template <class F>
  void run(F&& f) const {
    std::array<int64_t, N> step;
    for (int k = 0; k < N; ++k) step[k] = inner_stride(k);
    rows([&](std::array<int64_t, N> o, int64_t inner) {
      for (int64_t i = 0; i < inner; ++i) {
        f(o);
        for (int k = 0; k < N; ++k) o[k] += step[k];
      }
    });
  }

  // Calls f(offsets, length) once per row of the innermost dim (strides inner_stride(k)).
  template <class F>
  void rows(F&& f) const {
    for (int64_t n : shape)
      if (n == 0) return;
    std::array<int64_t, N> off{};
    if (shape.empty()) {
      f(off, int64_t{1});
      return;
    }
    const int64_t nd = static_cast<int64_t>(shape.size());
    const int64_t inner = shape[nd - 1];
    std::vector<int64_t> idx(nd, 0);
    while (true) {
      f(off, inner);
      int64_t d = nd - 2;
      for (; d >= 0; --d) {
        for (int k = 0; k < N; ++k) off[k] += st[k][d];
        if (++idx[d] < shape[d]) break;
        for (int k = 0; k < N; ++k) off[k] -= st[k][d] * shape[d];
        idx[d] = 0;
      }
      if (d < 0) return;
    }
  }
};

template <class T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

}  // namespace
}  // namespace td::kernels::TD_ISA
