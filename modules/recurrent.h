#pragma once
// RNN (tanh / relu), LSTM and GRU, as torch.nn's: parameters weight_ih_l{k}[_reverse],
// weight_hh_l{k}[_reverse], bias_ih_l{k}[_reverse], bias_hh_l{k}[_reverse] (and LSTM's
// weight_hr_l{k}[_reverse] with proj_size), all drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)).
// Written with engine ops only: the input projection of every time step is one linear per layer
// and direction, then one linear per step, so under functional_vmap the sets' products become one
// batched GEMM per step whatever the number of sets.
#include <string>

#include "modules/module.h"

namespace td::nn {

class RNNBase : public Module {
 public:
  enum class Mode { RnnTanh, RnnRelu, Lstm, Gru };

  // forward(input, hx=None) -> (output, h_n); LSTM: (output, (h_n, c_n)). input [L, N, in]
  // ([N, L, in] with batch_first) or unbatched [L, in]; hx [layers * directions, N, out] (an
  // LSTM's a tuple (h0, c0), c0 [layers * directions, N, hidden]), 2-D for unbatched input.
  Value forward(const Tensor& input, const Value& hx);
  bool steps_over_parameters() const override { return true; }

  Mode mode;
  int64_t input_size, hidden_size, num_layers, proj_size;
  bool bias, batch_first, bidirectional;
  double dropout;

 protected:
  RNNBase(Mode mode, int64_t input_size, int64_t hidden_size, int64_t num_layers, bool bias,
          bool batch_first, double dropout, bool bidirectional, int64_t proj_size);
  std::string extra_repr() const override;

 private:
  struct Weights {
    Param w_ih, w_hh, b_ih, b_hh, w_hr;
  };
  const char* name() const;
  int64_t gates() const;
  int64_t out_size() const { return proj_size > 0 ? proj_size : hidden_size; }
  // One direction of one layer over the whole sequence x [T, N, in]; h and c are updated to the
  // last step's states and the outputs [T, N, out] are returned.
  Tensor run_direction(const Weights& w, const Tensor& x, Tensor& h, Tensor& c, bool reverse) const;
  std::vector<Weights> weights_;  // layer * directions + direction
};

class RNN : public RNNBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(RNN); }
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, bool batch_first = false,
      double dropout = 0.0, bool bidirectional = false);
};

class LSTM : public RNNBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(LSTM); }
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       bool batch_first = false, double dropout = 0.0, bool bidirectional = false,
       int64_t proj_size = 0);
};

class GRU : public RNNBase {
 public:
  const std::type_info* concurrent_forward_class() const override { return &typeid(GRU); }
  GRU(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
      bool batch_first = false, double dropout = 0.0, bool bidirectional = false);
};

}  // namespace td::nn
