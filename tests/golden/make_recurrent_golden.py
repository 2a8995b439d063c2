#!/usr/bin/python3
"""Golden data of tests/modules_recurrent_test.cpp: RNN, LSTM and GRU computed by PyTorch 1.13.

Writes tests/data/modules/recurrent_<case>.safetensors with keys:
  module.<name>       the module's parameters (named_parameters order and names)
  input, h0, c0       the inputs (h0/c0 only where the case passes them)
  output, h_n, c_n    what the module returns
and tests/data/modules/recurrent_stacked_<case>.safetensors for functional_vmap over several
members: params.<name> stacked over the members, input (shared) or input/h0 with one slice per
member, and output/h_n/c_n stacked from a plain loop over the members.
Run from anywhere: /usr/bin/python3 tests/golden/make_recurrent_golden.py (needs only torch).
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "modules")


def run(m, x, hx):
    out, h = m(x) if hx is None else m(x, hx)
    if isinstance(h, tuple):
        return {"output": out, "h_n": h[0], "c_n": h[1]}
    return {"output": out, "h_n": h}


def states(m, x, batched_dim, with_c):
    """Random initial states of the right shape for input x."""
    d = 2 if m.bidirectional else 1
    out_size = m.proj_size if getattr(m, "proj_size", 0) else m.hidden_size
    lead = (m.num_layers * d,) + (() if batched_dim is None else (x.shape[batched_dim],))
    h0 = torch.randn(*lead, out_size) * 0.5
    return (h0, torch.randn(*lead, m.hidden_size) * 0.5) if with_c else h0


def single(name, m, x, with_state, batched_dim):
    m.eval()
    data = {"module." + k: v for k, v in m.named_parameters()}
    data["input"] = x
    hx = None
    if with_state:
        hx = states(m, x, batched_dim, isinstance(m, nn.LSTM))
        if isinstance(hx, tuple):
            data["h0"], data["c0"] = hx
        else:
            data["h0"] = hx
    with torch.enable_grad():  # the reference path, as a user's call would take it
        data.update(run(m, x, hx))
    safetensors_io.save(data, os.path.join(OUT, f"recurrent_{name}.safetensors"))


def stacked(name, make, x, per_set_input, h0_per_set, members=3):
    nets = [make() for _ in range(members)]
    for n in nets:
        n.eval()
    names = [k for k, _ in nets[0].named_parameters()]
    data = {"params." + k: torch.stack([dict(n.named_parameters())[k].detach() for n in nets])
            for k in names}
    data["input"] = x
    h0 = None
    if h0_per_set:
        h0 = torch.stack([states(n, x[i] if per_set_input else x, 1 - nets[0].batch_first, False)
                          for i, n in enumerate(nets)])
        data["h0"] = h0
    results = []
    for i, n in enumerate(nets):
        xi = x[i] if per_set_input else x
        results.append(run(n, xi, None if h0 is None else h0[i]))
    for k in results[0]:
        data[k] = torch.stack([r[k] for r in results])
    safetensors_io.save(data, os.path.join(OUT, f"recurrent_stacked_{name}.safetensors"))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    x = torch.randn(6, 3, 4)  # [T, N, in]
    xb = torch.randn(3, 6, 4)  # [N, T, in]
    xu = torch.randn(5, 4)  # unbatched [T, in]
    single("rnn_tanh", nn.RNN(4, 5, num_layers=2), x, True, 1)
    single("rnn_relu", nn.RNN(4, 5, nonlinearity="relu", bias=False, batch_first=True,
                              bidirectional=True), xb, False, 0)
    single("rnn_unbatched", nn.RNN(4, 3, num_layers=2, bidirectional=True), xu, True, None)
    single("lstm", nn.LSTM(4, 6, num_layers=2, batch_first=True), xb, True, 0)
    single("lstm_no_state", nn.LSTM(4, 6), x, False, 1)
    single("lstm_proj", nn.LSTM(4, 6, num_layers=2, proj_size=3, bidirectional=True), x, True, 1)
    single("lstm_unbatched", nn.LSTM(4, 5, proj_size=2, bias=False), xu, True, None)
    single("lstm_dropout_eval", nn.LSTM(4, 5, num_layers=3, dropout=0.4), x, False, 1)
    single("gru", nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True), xb, True, 0)
    single("gru_unbatched", nn.GRU(4, 6, bias=False), xu, True, None)

    stacked("lstm", lambda: nn.LSTM(4, 6, num_layers=2, batch_first=True), xb, False, False)
    stacked("gru_per_set", lambda: nn.GRU(4, 5, batch_first=True, bidirectional=True),
            torch.randn(3, 2, 7, 4), True, True)
    stacked("rnn", lambda: nn.RNN(4, 5, nonlinearity="relu"), x, False, False)


if __name__ == "__main__":
    main()
