// Printing like PyTorch's tensor repr (precision 4, linewidth 80, summarised above 1000
// elements with 3 edge items), and batched tensors as BatchedTensor(lvl, bdim, value).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <string>

#include "engine/batching.h"
#include "engine/tensor.h"

namespace td {
namespace {

constexpr int64_t kThreshold = 1000, kEdge = 3, kLineWidth = 80;

std::string fmt(const char* f, long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Chooses one format for all printed elements, as torch._tensor_str._Formatter does.
struct Formatter {
  bool floating = false, int_mode = true, sci_mode = false;
  size_t width = 1;

  Formatter(DType dtype, const std::vector<long double>& vals) : floating(is_floating(dtype)) {
    if (!floating) {
      for (long double v : vals) width = std::max(width, raw(v).size());
      return;
    }
    std::vector<long double> nz;
    for (long double v : vals)
      if (std::isfinite(v) && v != 0) nz.push_back(std::abs(v));
    if (nz.empty()) return;
    const long double mn = *std::min_element(nz.begin(), nz.end());
    const long double mx = *std::max_element(nz.begin(), nz.end());
    for (long double v : nz)
      if (v != std::ceil(v)) int_mode = false;
    if (int_mode) {
      sci_mode = mx / mn > 1000. || mx > 1.e8;
    } else {
      sci_mode = mx / mn > 1000. || mx > 1.e8 || mn < 1.e-4;
    }
    for (long double v : vals)
      if (std::isfinite(v) && v != 0) {
        size_t w = sci_mode ? fmt("%.4Le", v).size()
                            : (int_mode ? fmt("%.0Lf", v).size() + 1 : fmt("%.4Lf", v).size());
        width = std::max(width, w);
      }
  }

  std::string raw(long double v) const {
    if (!floating) return bool_dtype ? (v != 0 ? "True" : "False") : fmt("%.0Lf", v);
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci_mode) return fmt("%.4Le", v);
    if (int_mode) return fmt("%.0Lf", v) + ".";
    return fmt("%.4Lf", v);
  }

  std::string format(long double v) const {
    std::string s = raw(v);
    return s.size() < width ? std::string(width - s.size(), ' ') + s : s;
  }

  bool bool_dtype = false;
};

// Reads the (contiguous) tensor's element i as a long double.
long double element(const Tensor& c, int64_t i) {
  return visit_dtype(c.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return static_cast<long double>(c.data<T>()[i]);
  });
}

struct Printer {
  Tensor c;  // contiguous
  Strides st;
  bool summarize;

  // Elements that will be printed (the summarised data when summarising).
  void collect(int64_t d, int64_t off, std::vector<long double>& out) const {
    if (d == c.dim()) {
      out.push_back(element(c, off));
      return;
    }
    const int64_t n = c.shape()[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdge && i == kEdge) i = n - kEdge;
      collect(d + 1, off + i * st[d], out);
    }
  }

  std::string str(const Formatter& f, int64_t d, int64_t off, int64_t indent) const {
    const int64_t nd = c.dim();
    if (nd == 0) return f.format(element(c, off));
    const int64_t n = c.shape()[d];
    const bool cut = summarize && n > 2 * kEdge;
    if (d == nd - 1) {
      std::vector<std::string> data;
      for (int64_t i = 0; i < n; ++i) {
        if (cut && i == kEdge) {
          data.push_back(" ...");
          i = n - kEdge;
        }
        data.push_back(f.format(element(c, off + i * st[d])));
      }
      const int64_t elem_len = static_cast<int64_t>(f.width) + 2;
      const int64_t per_line = std::max<int64_t>(1, (kLineWidth - indent) / elem_len);
      std::string s = "[";
      for (size_t i = 0; i < data.size(); ++i) {
        if (i > 0) {
          s += ",";
          if (i % per_line == 0) {
            s += '\n';
            s.append(static_cast<size_t>(indent + 1), ' ');
          } else {
            s += ' ';
          }
        }
        s += data[i];
      }
      return s + "]";
    }
    std::vector<std::string> slices;
    for (int64_t i = 0; i < n; ++i) {
      if (cut && i == kEdge) {
        slices.push_back("...");
        i = n - kEdge;
      }
      slices.push_back(str(f, d + 1, off + i * st[d], indent + 1));
    }
    std::string sep = ",";
    sep.append(static_cast<size_t>(nd - d - 1), '\n');
    sep.append(static_cast<size_t>(indent + 1), ' ');
    std::string s = "[";
    for (size_t i = 0; i < slices.size(); ++i) {
      if (i) s += sep;
      s += slices[i];
    }
    s += ']';
    return s;
  }
};

std::string tuple_str(const Shape& s) {
  std::string r = "(";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

void print_plain(std::ostream& os, const Tensor& t) {
  const int64_t indent = 7;  // "tensor("
  std::string body;
  std::vector<std::string> suffixes;
  if (t.numel() == 0) {
    body = "[]";
    if (t.dim() != 1) suffixes.push_back("size=" + tuple_str(t.shape()));
  } else {
    Printer p{t.contiguous(), {}, t.numel() > kThreshold};
    p.st = contiguous_strides(p.c.shape());
    std::vector<long double> vals;
    p.collect(0, 0, vals);
    Formatter f(t.dtype(), vals);
    f.bool_dtype = t.dtype() == DType::Bool;
    if (f.bool_dtype) {
      f.width = 1;
      for (long double v : vals) f.width = std::max(f.width, f.raw(v).size());
    }
    body = p.str(f, 0, 0, indent);
  }
  // As PyTorch: int64 and bool are implied by the printed values, except when there are none.
  const bool implied = t.dtype() == DType::Float32 ||
                       (t.numel() > 0 && (t.dtype() == DType::Int64 || t.dtype() == DType::Bool));
  if (!implied) suffixes.push_back(std::string("dtype=td.") + dtype_name(t.dtype()));
  std::string s = "tensor(" + body;
  const size_t nl = s.rfind('\n');
  int64_t last_line = static_cast<int64_t>(s.size()) -
                      (nl == std::string::npos ? -1 : static_cast<int64_t>(nl)) + 1;
  for (const std::string& suf : suffixes) {
    const int64_t len = static_cast<int64_t>(suf.size());
    if (last_line + len + 2 > kLineWidth) {
      s += ",\n" + std::string(indent, ' ') + suf;
      last_line = indent + len;
    } else {
      s += ", " + suf;
      last_line += len + 2;
    }
  }
  os << s << ")";
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  if (t.is_batched()) {
    const int64_t level = t.max_level();
    Batched b = remove_batch_tag(t, level);
    os << "BatchedTensor(lvl=" << level << ", bdim=" << b.bdim.value_or(-1) << ", value=";
    return os << b.value << ")";
  }
  print_plain(os, t);
  return os;
}

}  // namespace td
