#include "modules/recurrent.h"

#include <cmath>
#include <sstream>

#include "engine/ops.h"
#include "modules/init.h"

namespace td::nn {

RNNBase::RNNBase(Mode m, int64_t in, int64_t hidden, int64_t layers, bool with_bias, bool bf,
                 double p, bool bidir, int64_t proj)
    : mode(m),
      input_size(in),
      hidden_size(hidden),
      num_layers(layers),
      proj_size(proj),
      bias(with_bias),
      batch_first(bf),
      bidirectional(bidir),
      dropout(p) {
  const std::string op = std::string("[") + name() + "]";
  if (in < 0 || hidden <= 0 || layers <= 0)
    throw_error<ValueError>(op, " input_size must be >= 0, hidden_size and num_layers > 0, got ",
                            in, ", ", hidden, " and ", layers);
  if (!(p >= 0.0 && p <= 1.0))
    throw_error<ValueError>(op, " dropout should be a number in range [0, 1], got ", p);
  if (proj < 0)
    throw_error<ValueError>(
        op, " proj_size should be a positive integer or zero to disable projections, got ", proj);
  if (proj > 0 && m != Mode::Lstm)
    throw_error<ValueError>(op, " proj_size is only supported for LSTM, not RNN or GRU");
  if (proj >= hidden)
    throw_error<ValueError>(op, " proj_size (", proj, ") has to be smaller than hidden_size (",
                            hidden, ")");
  const int64_t dirs = bidir ? 2 : 1, rows = gates() * hidden;
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  // torch's order: per layer, per direction: weight_ih, weight_hh, bias_ih, bias_hh, weight_hr
  for (int64_t l = 0; l < layers; ++l) {
    for (int64_t d = 0; d < dirs; ++d) {
      const std::string sfx = "_l" + std::to_string(l) + (d ? "_reverse" : "");
      const int64_t layer_in = l == 0 ? in : out_size() * dirs;
      Weights w;
      w.w_ih = register_parameter("weight_ih" + sfx, uniform_init({rows, layer_in}, bound));
      w.w_hh = register_parameter("weight_hh" + sfx, uniform_init({rows, out_size()}, bound));
      if (with_bias) {
        w.b_ih = register_parameter("bias_ih" + sfx, uniform_init({rows}, bound));
        w.b_hh = register_parameter("bias_hh" + sfx, uniform_init({rows}, bound));
      }
      if (proj > 0)
        w.w_hr = register_parameter("weight_hr" + sfx, uniform_init({proj, hidden}, bound));
      weights_.push_back(w);
    }
  }
  register_method("forward", &RNNBase::forward, {"input", "hx"}, {{"hx", Value()}});
}

const char* RNNBase::name() const {
  switch (mode) {
    case Mode::Lstm:
      return "LSTM";
    case Mode::Gru:
      return "GRU";
    default:
      return "RNN";
  }
}

int64_t RNNBase::gates() const {
  switch (mode) {
    case Mode::Lstm:
      return 4;
    case Mode::Gru:
      return 3;
    default:
      return 1;
  }
}

Tensor RNNBase::run_direction(const Weights& w, const Tensor& x, Tensor& h, Tensor& c,
                              bool reverse) const {
  const int64_t steps = x.size(0);
  // Every step's input projection in one product, out of the time loop.
  const Tensor xp = linear(x, w.w_ih, w.b_ih);
  std::vector<Tensor> outs(static_cast<size_t>(steps));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const Tensor xt = xp.select(0, t);
    const Tensor hp = linear(h, w.w_hh, w.b_hh);
    switch (mode) {
      case Mode::RnnTanh:
        h = (xt + hp).tanh();
        break;
      case Mode::RnnRelu:
        h = (xt + hp).relu();
        break;
      case Mode::Lstm: {
        auto [h2, c2] = lstm_pointwise(xt, hp, c);
        c = c2;
        h = w.w_hr.defined() ? linear(h2, w.w_hr) : h2;
        break;
      }
      case Mode::Gru:
        h = gru_pointwise(xt, hp, h);
        break;
    }
    outs[static_cast<size_t>(t)] = h;
  }
  return stack(outs, 0);
}

Value RNNBase::forward(const Tensor& input, const Value& hx) {
  const std::string op = std::string("[") + name() + "]";
  if (input.dim() != 2 && input.dim() != 3)
    throw_error<ValueError>(op, " expected input to be 2-D or 3-D, got shape ",
                            shape_str(input.shape()));
  const bool batched = input.dim() == 3;
  if (input.size(-1) != input_size)
    throw_error<ValueError>(op, " input.size(-1) must be equal to input_size (", input_size,
                            "), got shape ", shape_str(input.shape()));
  if (!is_floating(input.dtype()))
    throw_error<TypeError>(op, " input must be floating point, got ", dtype_name(input.dtype()));
  // [T, N, in] from here on
  const Tensor x = !batched ? input.unsqueeze(1) : batch_first ? input.transpose(0, 1) : input;
  const int64_t steps = x.size(0), n = x.size(1), dirs = bidirectional ? 2 : 1;
  if (steps == 0)
    throw_error<ValueError>(op, " expected a sequence of at least one step, got input shape ",
                            shape_str(input.shape()));
  const bool lstm = mode == Mode::Lstm;

  auto state = [&](const Value& v, int64_t size, const char* what) {
    if (!v.is_tensor())
      throw_error<TypeError>(op, " ", what, " must be a Tensor, not ", v.kind_name());
    const Tensor& s = v.tensor();
    const Shape want = batched ? Shape{num_layers * dirs, n, size} : Shape{num_layers * dirs, size};
    if (s.shape() != want)
      throw_error<ValueError>(op, " expected ", what, " of shape ", shape_str(want), " for input ",
                              shape_str(input.shape()), ", got ", shape_str(s.shape()));
    if (s.dtype() != input.dtype())
      throw_error<TypeError>(op, " input and ", what, " must have the same dtype, got ",
                             dtype_name(input.dtype()), " and ", dtype_name(s.dtype()));
    return batched ? s : s.unsqueeze(1);
  };
  Tensor h0, c0;
  if (!hx.is_none()) {
    if (lstm) {
      if (!hx.is_list() || hx.list().size() != 2)
        throw_error<TypeError>(op, " hx must be a tuple (h_0, c_0), not ",
                               hx.is_list() ? "a tuple of " + std::to_string(hx.list().size())
                                            : std::string(hx.kind_name()));
      h0 = state(hx.list()[0], out_size(), "h_0");
      c0 = state(hx.list()[1], hidden_size, "c_0");
    } else {
      h0 = state(hx, out_size(), "hx");
    }
  }

  std::vector<Tensor> hn, cn;
  Tensor layer_in = x;
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const int64_t i = l * dirs + d;
      Tensor h = h0.defined() ? h0.select(0, i) : zeros({n, out_size()}, input.dtype());
      Tensor c;
      if (lstm) c = c0.defined() ? c0.select(0, i) : zeros({n, hidden_size}, input.dtype());
      outs.push_back(run_direction(weights_[static_cast<size_t>(i)], layer_in, h, c, d == 1));
      hn.push_back(h);
      if (lstm) cn.push_back(c);
    }
    layer_in = dirs == 1 ? outs[0] : cat(outs, 2);
    if (l + 1 < num_layers && dropout > 0.0 && is_training())
      layer_in = td::dropout(layer_in, dropout, true);
  }
  Tensor out = layer_in, h_n = stack(hn, 0), c_n = lstm ? stack(cn, 0) : Tensor();
  if (!batched) {
    out = out.squeeze(1);
    h_n = h_n.squeeze(1);
    if (lstm) c_n = c_n.squeeze(1);
  } else if (batch_first) {
    out = out.transpose(0, 1);
  }
  if (lstm) return Value(ValueList{Value(out), Value(ValueList{Value(h_n), Value(c_n)})});
  return Value(ValueList{Value(out), Value(h_n)});
}

std::string RNNBase::extra_repr() const {
  std::ostringstream os;
  os << input_size << ", " << hidden_size;
  if (proj_size != 0) os << ", proj_size=" << proj_size;
  if (num_layers != 1) os << ", num_layers=" << num_layers;
  if (!bias) os << ", bias=False";
  if (batch_first) os << ", batch_first=True";
  if (dropout != 0.0) os << ", dropout=" << repr_double(dropout);
  if (bidirectional) os << ", bidirectional=True";
  return os.str();
}

namespace {
RNNBase::Mode rnn_mode(const std::string& nonlinearity) {
  if (nonlinearity == "tanh") return RNNBase::Mode::RnnTanh;
  if (nonlinearity == "relu") return RNNBase::Mode::RnnRelu;
  throw_error<ValueError>("[RNN] unknown nonlinearity '", nonlinearity, "' (tanh or relu)");
}
}  // namespace

RNN::RNN(int64_t in, int64_t hidden, int64_t layers, const std::string& nonlinearity,
         bool with_bias, bool bf, double p, bool bidir)
    : RNNBase(rnn_mode(nonlinearity), in, hidden, layers, with_bias, bf, p, bidir, 0) {}

LSTM::LSTM(int64_t in, int64_t hidden, int64_t layers, bool with_bias, bool bf, double p,
           bool bidir, int64_t proj)
    : RNNBase(Mode::Lstm, in, hidden, layers, with_bias, bf, p, bidir, proj) {}

GRU::GRU(int64_t in, int64_t hidden, int64_t layers, bool with_bias, bool bf, double p, bool bidir)
    : RNNBase(Mode::Gru, in, hidden, layers, with_bias, bf, p, bidir, 0) {}

}  // namespace td::nn
