// pad: constant, reflect, replicate and circular padding, composed of other ops.
#include <algorithm>
#include <string>

#include "engine/ops.h"

namespace td {

// Made of cat (constant) and index_select (the other modes), so vmap batches it through their
// rules.
Tensor pad(const Tensor& x, const IntList& pad, const std::string& mode, double value) {
  const int64_t dims = static_cast<int64_t>(pad.size()) / 2, rank = x.dim();
  if (pad.size() % 2 != 0)
    throw_error<ValueError>("[pad] padding length must be even, got ", pad, " for input of shape ",
                            x.shape());
  if (dims > rank)
    throw_error<ValueError>("[pad] padding ", pad, " is too long for input of shape ", x.shape());
  const bool constant = mode == "constant";
  if (!constant && mode != "reflect" && mode != "replicate" && mode != "circular")
    throw_error<ValueError>(
        "[pad] mode must be 'constant', 'reflect', 'replicate' or "
        "'circular', got '",
        mode, "'");
  if (!constant && !(dims >= 1 && dims <= 3 && rank == dims + 2) &&
      !(mode != "circular" && dims >= 1 && dims <= 3 && rank == dims + 1))
    throw_error<ValueError>("[pad] ", mode, " padding of ", dims, " dims takes an input of ",
                            mode == "circular" ? "" : std::to_string(dims + 1) + " or ", dims + 2,
                            " dims, got shape ", x.shape());
  Tensor y = x;
  for (int64_t i = 0; i < dims; ++i) {
    const int64_t d = rank - 1 - i, n = y.size(d);
    const int64_t lo = pad[2 * i], hi = pad[2 * i + 1];
    int64_t len = 0;
    if (lo < -n || hi < -n || __builtin_add_overflow(n, lo, &len) ||
        __builtin_add_overflow(len, hi, &len) || len < 0)
      throw_error<ValueError>("[pad] padding ", pad, " crops dim ", d, " of input of shape ",
                              x.shape(), " to a negative size, or grows it past int64");
    // the elements left after cropping: [c0, c0 + kept)
    const int64_t c0 = std::max<int64_t>(0, -lo), kept = n - c0 - std::max<int64_t>(0, -hi);
    if (constant) {
      // crop first, then the value blocks
      Tensor mid = y.narrow(d, c0, std::max<int64_t>(0, kept));
      if (lo <= 0 && hi <= 0) {
        y = mid;
        continue;
      }
      Shape block = y.shape();
      std::vector<Tensor> parts;
      if (lo > 0) {
        block[d] = lo;
        parts.push_back(full(block, value, y.dtype()));
      }
      parts.push_back(mid);
      if (hi > 0) {
        block[d] = hi;
        parts.push_back(full(block, value, y.dtype()));
      }
      y = cat(parts, d);
      continue;
    }
    if (mode == "reflect" && (lo >= n || hi >= n))
      throw_error<ValueError>("[pad] reflect padding ", pad, " should be less than dim ", d,
                              " of input of shape ", x.shape());
    if (mode == "circular" && (lo > n || hi > n))
      throw_error<ValueError>("[pad] circular padding ", pad, " wraps around dim ", d,
                              " of input of shape ", x.shape(), " more than once");
    // circular wraps around what is left after cropping, as torch; reflect and replicate
    // around the whole dim
    if ((mode == "circular" ? kept : n) <= 0 && len > 0)
      throw_error<ValueError>("[pad] ", mode, " padding ", pad, " of an empty dim ", d,
                              " of input of shape ", x.shape());
    std::vector<int64_t> idx;
    try {
      idx.resize(static_cast<size_t>(len));
    } catch (const std::exception&) {  // length_error or bad_alloc
      throw_error<RuntimeError>("[pad] cannot allocate the ", len, " indices of dim ", d,
                                " padded by ", pad, " (input of shape ", x.shape(), ")");
    }
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i0 = j - lo;  // output j reads input i0, mapped into range
      int64_t s = i0;
      if (mode == "reflect")
        s = i0 < 0 ? -i0 : i0 >= n ? 2 * (n - 1) - i0 : i0;
      else if (mode == "replicate")
        s = std::clamp<int64_t>(i0, 0, n - 1);
      else
        s = c0 + ((i0 - c0) % kept + kept) % kept;
      idx[static_cast<size_t>(j)] = s;
    }
    y = index_select(y, d, tensor<int64_t>(idx, {len}));
  }
  return y;
}

}  // namespace td
