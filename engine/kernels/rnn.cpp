// The point-wise part of LSTM and GRU steps: one pass over the gates instead of a kernel per
// sigmoid, tanh, product and sum (an ensemble's step is small, so each pass was mostly overhead).
// Every element goes through the vector code, the row's last ones in a zero-padded vector, so
// an element's bits do not depend on the number of rows (sets) a call holds.
#include <algorithm>
#include <array>
#include <vector>
#include <xsimd/xsimd.hpp>

#include "engine/dispatch.h"
#include "engine/kernels/exp_log.h"
#include "engine/kernels/kernels.h"
#include "engine/kernels/simd.h"
#include "engine/kernels/strided.h"

namespace td::kernels::TD_ISA {
namespace {

template <class T>
using B = xsimd::batch<T>;

// the unary kernel's sigmoid and tanh, so that fused and unfused steps agree
template <class T>
B<T> sigmoid(B<T> v) {
  return div_exact(B<T>(T(1)), B<T>(T(1)) + exp_lanes<T>(-v));
}
template <class T>
B<T> tanh(B<T> v) {
  return xsimd::tanh(v);
}

// Runs cell over the H columns of a row, W at a time: in[i] points at operand i's row (a gates
// operand holds blocks of H), out[o] at output o's. cell(load) returns the output vectors, where
// load(i, b) is operand i's block b at the current columns.
template <class T, size_t NIn, size_t NOut, class Cell>
void row_loop(const std::array<const T*, NIn>& in, const std::array<T*, NOut>& out, int64_t H,
              Cell cell) {
  constexpr int64_t W = static_cast<int64_t>(B<T>::size);
  for (int64_t j = 0; j < H; j += W) {
    const int64_t n = std::min(W, H - j);
    // operand i's block b at columns [j, j + n), zero-padded to a vector at the row's end
    auto load = [&](size_t i, int64_t b) {
      const T* p = in[i] + b * H + j;
      if (n == W) return B<T>::load_unaligned(p);
      alignas(64) T buf[W] = {};
      std::copy(p, p + n, buf);
      return B<T>::load_aligned(buf);
    };
    const std::array<B<T>, NOut> r = cell(load);
    for (size_t o = 0; o < NOut; ++o) {
      if (n == W) {
        r[o].store_unaligned(out[o] + j);
      } else {
        alignas(64) T buf[W];
        r[o].store_aligned(buf);
        std::copy(buf, buf + n, out[o] + j);
      }
    }
  }
}

// Calls row(offsets) for each row of the leading dims of the last operand's shape (the output),
// offsets into each operand, in row-major order.
template <size_t N, class F>
void for_rows(const std::array<const Tensor*, N>& t, F row) {
  const Tensor& out = *t[N - 1];
  const int64_t nd = out.dim() - 1;
  int64_t rows = 1;
  for (int64_t d = 0; d < nd; ++d) rows *= out.size(d);
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  std::array<int64_t, N> off{};
  for (int64_t r = 0; r < rows; ++r) {
    row(off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      for (size_t k = 0; k < N; ++k) off[k] += t[k]->stride(d);
      if (++idx[static_cast<size_t>(d)] < out.size(d)) break;
      for (size_t k = 0; k < N; ++k) off[k] -= t[k]->stride(d) * out.size(d);
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

template <class T>
void lstm_typed(const Tensor& gx, const Tensor& gh, const Tensor& c, const Tensor& h_out,
                const Tensor& c_out) {
  const int64_t H = c.size(-1);
  const T *px = ptr<T>(gx), *pg = ptr<T>(gh), *pc = ptr<T>(c);
  T *ph = ptr<T>(h_out), *pco = ptr<T>(c_out);
  for_rows<5>({&gx, &gh, &c, &h_out, &c_out}, [&](const std::array<int64_t, 5>& o) {
    row_loop<T, 3, 2>({px + o[0], pg + o[1], pc + o[2]}, {ph + o[3], pco + o[4]}, H, [](auto load) {
      auto gate = [&](int64_t b) { return load(0, b) + load(1, b); };
      const B<T> i = sigmoid<T>(gate(0)), f = sigmoid<T>(gate(1));
      const B<T> g = tanh<T>(gate(2)), o = sigmoid<T>(gate(3));
      const B<T> c2 = f * load(2, 0) + i * g;
      return std::array<B<T>, 2>{o * tanh<T>(c2), c2};
    });
  });
}

template <class T>
void gru_typed(const Tensor& gx, const Tensor& gh, const Tensor& h, const Tensor& h_out) {
  const int64_t H = h.size(-1);
  const T *px = ptr<T>(gx), *pg = ptr<T>(gh), *ph = ptr<T>(h);
  T* po = ptr<T>(h_out);
  for_rows<4>({&gx, &gh, &h, &h_out}, [&](const std::array<int64_t, 4>& o) {
    row_loop<T, 3, 1>({px + o[0], pg + o[1], ph + o[2]}, {po + o[3]}, H, [](auto load) {
      const B<T> r = sigmoid<T>(load(0, 0) + load(1, 0));
      const B<T> z = sigmoid<T>(load(0, 1) + load(1, 1));
      const B<T> n = tanh<T>(load(0, 2) + r * load(1, 2));
      return std::array<B<T>, 1>{n + z * (load(2, 0) - n)};
    });
  });
}

}  // namespace

void lstm_pointwise(const Tensor& gx, const Tensor& gh, const Tensor& c, const Tensor& h_out,
                    const Tensor& c_out) {
  count_kernel(KernelKind::Elementwise);
  if (h_out.numel() == 0) return;
  if (c.dtype() == DType::Float64)
    lstm_typed<double>(gx, gh, c, h_out, c_out);
  else
    lstm_typed<float>(gx, gh, c, h_out, c_out);
}

void gru_pointwise(const Tensor& gx, const Tensor& gh, const Tensor& h, const Tensor& h_out) {
  count_kernel(KernelKind::Elementwise);
  if (h_out.numel() == 0) return;
  if (h.dtype() == DType::Float64)
    gru_typed<double>(gx, gh, h, h_out);
  else
    gru_typed<float>(gx, gh, h, h_out);
}

}  // namespace td::kernels::TD_ISA
