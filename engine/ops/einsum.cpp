// einsum, composed of ops that batch natively (permute, reshape, sum, index_select, mul, matmul),
// so that a vmapped einsum stays one batched call.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops.h"

namespace td {
namespace {

constexpr int kLetters = 52;  // A-Z, then a-z (torch's order, which sorts an implicit output)
constexpr int kEllipsis = -1;

int letter_label(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

struct Context {
  std::string_view equation;
  std::span<const Tensor> operands;

  // "[einsum] <what> (equation 'ij,jk', operand shapes [2, 3], [3, 4])"
  template <class E = ValueError, class... Args>
  [[noreturn]] void fail(Args&&... args) const {
    std::ostringstream os;
    os << " (equation " << quote_key(equation) << ", operand shapes ";
    for (size_t i = 0; i < operands.size(); ++i) {
      if (i) os << ", ";
      if (operands[i].defined())
        os << operands[i].shape();
      else
        os << "undefined";
    }
    if (operands.empty()) os << "none";
    os << ")";
    throw_error<E>("[einsum] ", std::forward<Args>(args)..., os.str());
  }

  // The name of a label in messages: its letter, or "..." for a broadcast dim.
  static std::string name(int label) {
    if (label >= kLetters) return "...";
    return std::string(1, label < 26 ? char('A' + label) : char('a' + label - 26));
  }
};

struct Subscripts {
  std::vector<std::vector<int>> inputs;  // letters and kEllipsis, per operand
  std::vector<int> output;               // the same for the explicit output
  bool explicit_output = false;
};

// One operand's or the output's subscripts: letters, spaces and at most one "...".
std::vector<int> parse_term(const Context& ctx, std::string_view eq, size_t begin, size_t end,
                            const std::string& whose) {
  std::vector<int> labels;
  bool ellipsis = false;
  for (size_t i = begin; i < end; ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (c == '.') {
      if (ellipsis) ctx.fail("found '.' for ", whose, " for which an ellipsis was already found");
      if (i + 2 >= end || eq[i + 1] != '.' || eq[i + 2] != '.')
        ctx.fail("found '.' for ", whose, " that is not part of an ellipsis '...'");
      ellipsis = true;
      labels.push_back(kEllipsis);
      i += 2;
      continue;
    }
    const int l = letter_label(c);
    if (l < 0)
      ctx.fail("invalid subscript ", quote_key(std::string_view(&eq[i], 1)), " at index ", i,
               " of the equation: subscripts must be in [a-zA-Z]");
    labels.push_back(l);
  }
  return labels;
}

Subscripts parse(const Context& ctx) {
  const std::string_view eq = ctx.equation;
  Subscripts s;
  const size_t arrow = eq.find("->");
  const size_t lhs_end = arrow == std::string_view::npos ? eq.size() : arrow;
  size_t begin = 0;
  for (size_t i = 0; i <= lhs_end; ++i) {
    if (i == lhs_end || eq[i] == ',') {
      const std::string whose = "operand " + std::to_string(s.inputs.size());
      s.inputs.push_back(parse_term(ctx, eq, begin, i, whose));
      begin = i + 1;
    }
  }
  if (s.inputs.size() != ctx.operands.size())
    ctx.fail("the equation has ", s.inputs.size(), " operand", s.inputs.size() == 1 ? "" : "s",
             " but ", ctx.operands.size(), " ", ctx.operands.size() == 1 ? "was" : "were",
             " given");
  if (arrow != std::string_view::npos) {
    s.explicit_output = true;
    for (size_t i = arrow + 2; i < eq.size(); ++i)
      if (eq[i] == ',' || eq[i] == '-' || eq[i] == '>')
        ctx.fail("the output (after '->') may not contain ", quote_key(eq.substr(i, 1)),
                 ": one '->' and one output only");
    s.output = parse_term(ctx, eq, arrow + 2, eq.size(), "the output");
  }
  return s;
}

// A diagonal over every repeated label of t: the repeats are moved last, flattened, and their
// diagonal picked by index_select (stride 1 + n + n^2 + ... in the flattened dims).
Tensor take_diagonals(const Context& ctx, size_t op, Tensor t, std::vector<int>& labels) {
  for (size_t i = 0; i < labels.size(); ++i) {
    const int l = labels[i];
    std::vector<int64_t> at;
    for (size_t j = i; j < labels.size(); ++j)
      if (labels[j] == l) at.push_back(static_cast<int64_t>(j));
    if (at.size() < 2) continue;
    const int64_t n = t.size(at[0]);
    for (int64_t d : at)
      if (t.size(d) != n)
        ctx.fail("subscript ", Context::name(l), " is repeated for operand ", op,
                 " but the sizes don't match, ", t.size(d), " != ", n);
    IntList perm;
    std::vector<int> rest;
    for (size_t j = 0; j < labels.size(); ++j)
      if (labels[j] != l) {
        perm.push_back(static_cast<int64_t>(j));
        rest.push_back(labels[j]);
      }
    Shape shape;
    for (int64_t d : perm) shape.push_back(t.size(d));
    int64_t stride = 0, block = 1;
    for (int64_t d : at) {
      perm.push_back(d);
      stride += block;
      block *= n;
    }
    shape.push_back(block);
    Tensor flat = t.permute(perm).reshape(shape);
    t = index_select(flat, -1, mul(arange(n), stride));
    rest.push_back(l);
    labels = std::move(rest);
    i = static_cast<size_t>(-1);  // the labels moved: look again from the start
  }
  return t;
}

struct Term {
  Tensor t;
  std::vector<int> labels;  // one per dim, distinct
};

int64_t size_of(const Term& x, int label) {
  const auto it = std::find(x.labels.begin(), x.labels.end(), label);
  return it == x.labels.end() ? -1 : x.t.size(it - x.labels.begin());
}

// Sums x over the given labels (none: x as it is).
Term sum_out(Term x, const std::vector<int>& labels) {
  if (labels.empty()) return x;
  IntList dims;
  std::vector<int> kept;
  for (size_t d = 0; d < x.labels.size(); ++d) {
    if (std::find(labels.begin(), labels.end(), x.labels[d]) != labels.end())
      dims.push_back(static_cast<int64_t>(d));
    else
      kept.push_back(x.labels[d]);
  }
  if (dims.empty()) return x;
  return {sum(x.t, dims), kept};
}

// x without its size-1 dims of the given labels.
Term squeeze_out(Term x, const std::vector<int>& labels) {
  for (int64_t d = static_cast<int64_t>(x.labels.size()) - 1; d >= 0; --d)
    if (std::find(labels.begin(), labels.end(), x.labels[d]) != labels.end()) {
      x.t = x.t.squeeze(d);
      x.labels.erase(x.labels.begin() + d);
    }
  return x;
}

// x's dims in the order `order` (every label of x, once).
Tensor arrange(const Term& x, const std::vector<int>& order) {
  IntList perm;
  for (int l : order)
    perm.push_back(std::find(x.labels.begin(), x.labels.end(), l) - x.labels.begin());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  return identity ? x.t : x.t.permute(perm);
}

// a and b combined over their labels: those in `keep` stay, the others shared by both are
// contracted. Shared kept labels are the batch of a matmul, contracted ones its inner dim.
Term combine(Term a, Term b, const std::vector<bool>& keep, const std::vector<int>& rank) {
  auto by_rank = [&](std::vector<int>& v) {
    std::sort(v.begin(), v.end(), [&](int x, int y) { return rank[x] < rank[y]; });
  };
  auto has = [](const Term& x, int l) {
    return std::find(x.labels.begin(), x.labels.end(), l) != x.labels.end();
  };
  // labels of one side only that nothing needs any more are summed first; a contracted label
  // of size 1 on one side (broadcast) is dropped there and summed over on the other
  std::vector<int> a_drop, b_drop, a_ones, b_ones;
  for (int l : a.labels) {
    if (keep[l]) continue;
    if (!has(b, l)) {
      a_drop.push_back(l);
      continue;
    }
    const int64_t na = size_of(a, l), nb = size_of(b, l);
    if (na == 1 && nb != 1) {
      a_ones.push_back(l);
      b_drop.push_back(l);
    } else if (nb == 1 && na != 1) {
      b_ones.push_back(l);
      a_drop.push_back(l);
    }
  }
  for (int l : b.labels)
    if (!keep[l] && !has(a, l)) b_drop.push_back(l);
  a = squeeze_out(sum_out(std::move(a), a_drop), a_ones);
  b = squeeze_out(sum_out(std::move(b), b_drop), b_ones);

  std::vector<int> batch, contract, a_only, b_only;
  for (int l : a.labels) {
    if (!has(b, l))
      a_only.push_back(l);
    else if (keep[l])
      batch.push_back(l);
    else
      contract.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a, l)) b_only.push_back(l);
  by_rank(batch);
  by_rank(contract);
  by_rank(a_only);
  by_rank(b_only);

  std::vector<int> labels = batch;
  labels.insert(labels.end(), a_only.begin(), a_only.end());
  labels.insert(labels.end(), b_only.begin(), b_only.end());
  auto concat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  int64_t m = 1, n = 1;
  for (int l : a_only) m *= size_of(a, l);
  for (int l : b_only) n *= size_of(b, l);

  if (contract.empty() || (m == 1 && n == 1)) {
    // no inner dim, or one output element per batch: element-wise products (summed over the
    // contracted labels), the size-1 dims broadcasting
    Tensor ta = arrange(a, concat(batch, a_only, contract));
    Tensor tb = arrange(b, concat(batch, b_only, contract));
    const int64_t nb = static_cast<int64_t>(batch.size());
    const int64_t na = static_cast<int64_t>(a_only.size());
    for (size_t i = 0; i < b_only.size(); ++i) ta = ta.unsqueeze(nb + na);
    for (size_t i = 0; i < a_only.size(); ++i) tb = tb.unsqueeze(nb);
    Tensor prod = mul(ta, tb);
    if (!contract.empty()) {
      IntList dims;
      for (size_t i = 0; i < contract.size(); ++i) dims.push_back(-1 - static_cast<int64_t>(i));
      prod = sum(prod, dims);
    }
    return {prod, labels};
  }
  int64_t k = 1;
  for (int l : contract) k *= size_of(a, l);
  Shape sa, sb, out;
  for (int l : batch) {
    sa.push_back(size_of(a, l));
    sb.push_back(size_of(b, l));
    out.push_back(size_of(a, l) == 1 ? size_of(b, l) : size_of(a, l));
  }
  sa.push_back(m);
  sa.push_back(k);
  sb.push_back(k);
  sb.push_back(n);
  for (int l : a_only) out.push_back(size_of(a, l));
  for (int l : b_only) out.push_back(size_of(b, l));
  Tensor ta = arrange(a, concat(batch, a_only, contract)).reshape(sa);
  Tensor tb = arrange(b, concat(batch, contract, b_only)).reshape(sb);
  return {matmul(ta, tb).reshape(out), labels};
}

}  // namespace

Tensor einsum(std::string_view equation, std::span<const Tensor> operands) {
  const Context ctx{equation, operands};
  if (operands.empty()) ctx.fail("needs at least one operand");
  for (size_t i = 0; i < operands.size(); ++i)
    if (!operands[i].defined()) ctx.fail("operand ", i, " is undefined");
  Subscripts s = parse(ctx);

  // dtypes: one compute dtype, as matmul's (floating and integral operands do not mix)
  DType dtype = operands[0].dtype();
  for (const Tensor& t : operands) {
    if (t.dtype() == kBool || is_floating(t.dtype()) != is_floating(dtype)) {
      std::ostringstream names;
      for (size_t i = 0; i < operands.size(); ++i)
        names << (i ? ", " : "") << dtype_name(operands[i].dtype());
      ctx.fail<TypeError>("operands of dtypes ", names.str(),
                          " are not supported together (bool is not, nor floating with integral "
                          "operands; cast with to())");
    }
    dtype = promote_types(dtype, t.dtype());
  }

  // the broadcast dims ("...") are right-aligned across operands
  int64_t n_ell = 0;
  std::vector<int64_t> ell_dims(operands.size(), 0);
  for (size_t i = 0; i < operands.size(); ++i) {
    const auto& in = s.inputs[i];
    const bool ell = std::find(in.begin(), in.end(), kEllipsis) != in.end();
    const int64_t letters = static_cast<int64_t>(in.size()) - (ell ? 1 : 0);
    const int64_t dims = operands[i].dim();
    if (!ell && letters != dims)
      ctx.fail("the number of subscripts (", letters, ") does not match the number of dims (", dims,
               ") of operand ", i, " and no ellipsis was given");
    if (ell && letters > dims)
      ctx.fail("the number of subscripts (", letters, ") is more than the number of dims (", dims,
               ") of operand ", i);
    if (ell) ell_dims[i] = dims - letters;
    n_ell = std::max(n_ell, ell_dims[i]);
  }
  const int n_labels = kLetters + static_cast<int>(n_ell);
  auto expand_ellipsis = [&](const std::vector<int>& in, int64_t count) {
    std::vector<int> out;
    for (int l : in) {
      if (l != kEllipsis) {
        out.push_back(l);
        continue;
      }
      for (int64_t j = n_ell - count; j < n_ell; ++j) out.push_back(kLetters + int(j));
    }
    return out;
  };

  // the output's labels
  std::vector<int> count(n_labels, 0);
  for (size_t i = 0; i < operands.size(); ++i)
    for (int l : s.inputs[i])
      if (l != kEllipsis) ++count[l];
  std::vector<int> output;
  if (s.explicit_output) {
    std::vector<bool> seen(n_labels, false);
    for (int l : s.output) {
      if (l == kEllipsis) continue;
      if (count[l] == 0)
        ctx.fail("output subscript ", Context::name(l),
                 " does not appear in the equation for any input operand");
      if (seen[l]) ctx.fail("output subscript ", Context::name(l), " appears more than once");
      seen[l] = true;
    }
    output = expand_ellipsis(s.output, n_ell);
  } else {
    for (int64_t j = 0; j < n_ell; ++j) output.push_back(kLetters + int(j));
    for (int l = 0; l < kLetters; ++l)
      if (count[l] == 1) output.push_back(l);
  }

  // each operand with its diagonals taken, then each letter's size checked across operands
  std::vector<Term> terms;
  for (size_t i = 0; i < operands.size(); ++i) {
    std::vector<int> labels = expand_ellipsis(s.inputs[i], ell_dims[i]);
    Tensor t = take_diagonals(ctx, i, operands[i].to(dtype), labels);
    terms.push_back({t, labels});
  }
  std::vector<int64_t> size(n_labels, 1);
  std::vector<int> users(n_labels, 0);  // operands holding the label
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t d = 0; d < terms[i].labels.size(); ++d) {
      const int l = terms[i].labels[d];
      const int64_t n = terms[i].t.size(static_cast<int64_t>(d));
      ++users[l];
      if (n == 1) continue;
      if (size[l] != 1 && size[l] != n) {
        if (l >= kLetters)
          ctx.fail("the dims of operand ", i,
                   " covered by '...' do not broadcast with those of"
                   " the operands before it");
        ctx.fail("subscript ", Context::name(l), " has size ", n, " for operand ", i,
                 ", which does not broadcast with the size ", size[l], " seen before");
      }
      size[l] = n;
    }

  // ranks: the output's labels in its order, then the others; results come out in this order
  std::vector<int> rank(n_labels, 0);
  std::vector<bool> in_output(n_labels, false);
  for (int l = 0; l < n_labels; ++l) rank[l] = static_cast<int>(output.size()) + l;
  for (size_t j = 0; j < output.size(); ++j) {
    rank[output[j]] = static_cast<int>(j);
    in_output[output[j]] = true;
  }

  // each operand's own labels that the output does not keep are summed first
  for (Term& t : terms) {
    std::vector<int> own;
    for (int l : t.labels)
      if (users[l] == 1 && !in_output[l]) own.push_back(l);
    t = sum_out(std::move(t), own);
  }
  // then operands are combined left to right, keeping what the output or a later one needs
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::vector<bool> keep = in_output;
    for (size_t j = i + 1; j < terms.size(); ++j)
      for (int l : terms[j].labels) keep[l] = true;
    acc = combine(std::move(acc), std::move(terms[i]), keep, rank);
  }
  return arrange(acc, output);
}

}  // namespace td
