#pragma once
// A sum in double whose order is fixed by the terms' indices, so that it vectorises and a row's
// result depends on its values alone (not on where the row lies, nor on how many rows a call
// holds): chunked, looped and unchunked vmapped calls agree bit for bit.
#include <cstdint>

namespace td::kernels {

// f(0) + ... + f(len - 1): 16 interleaved partial sums, then the tail.
template <class F>
double lane_sum(int64_t len, F f) {
  constexpr int64_t L = 16;
  double acc[L] = {};
  int64_t i = 0;
  for (; i + L <= len; i += L)
    for (int64_t l = 0; l < L; ++l) acc[l] += f(i + l);
  double s = 0;
  for (double a : acc) s += a;
  for (; i < len; ++i) s += f(i);
  return s;
}

}  // namespace td::kernels
