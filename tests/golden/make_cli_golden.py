#!/usr/bin/python3
"""Golden data for the `tdvmap run` ctest cases (tests/cli/CMakeLists.txt), from PyTorch 1.13.

Run from anywhere: /usr/bin/python3 tests/golden/make_cli_golden.py
For each case, an ensemble of SETS PyTorch modules in eval mode, its parameters and buffers
stacked with torch.stack (as torch.func.stack_module_state does), inputs, and the outputs of a
plain Python loop over the models, stacked. Writes to tests/data/cli/:
  <case>.params.safetensors     dotted names -> [SETS, ...]
  <case>.<input>.safetensors    one tensor per forward argument (key = the argument's name), or a
                                tuple keyed "0", "1", ...
  <case>.expected.safetensors   "output", or "0", "1", ... for a tuple ("1.0" nested)
  corrupt.safetensors           a params file cut short (must be rejected, not crash)
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "cli")
SETS = 5
torch.manual_seed(0)


def stacked_state(models):
    names = [n for n, _ in models[0].named_parameters()] + [n for n, _ in models[0].named_buffers()]
    states = [dict(list(m.named_parameters()) + list(m.named_buffers())) for m in models]
    return {n: torch.stack([s[n].detach() for s in states]) for n in names}


def flat(out, key=""):
    """A module's output as `tdvmap run --out` names it: "output", or "0", "1.0", ... for tuples."""
    if not isinstance(out, tuple):
        return {key or "output": out}
    d = {}
    for j, o in enumerate(out):
        d.update(flat(o, f"{key}.{j}" if key else str(j)))
    return d


def case(name, make, inputs, per_set=(), sets=SETS, grad=False):
    models = [make() for _ in range(sets)]
    for m in models:
        for bname, b in m.named_buffers():  # non-trivial running stats
            if b.dtype.is_floating_point:
                b.copy_(torch.rand_like(b) + 0.5 if "var" in bname else torch.randn_like(b))
        m.eval()

    def pick(v, i):  # set i's slice of a per-set input (each tensor of a tuple)
        return tuple(t[i] for t in v) if isinstance(v, tuple) else v[i]

    # grad=True: torch's reference path (TransformerEncoderLayer's no_grad fast path differs)
    with torch.set_grad_enabled(grad):
        outs = [flat(m(**{k: (pick(v, i) if k in per_set else v) for k, v in inputs.items()}))
                for i, m in enumerate(models)]
    expected = {k: torch.stack([o[k] for o in outs]) for k in outs[0]}
    safetensors_io.save(stacked_state(models), os.path.join(OUT, f"{name}.params.safetensors"))
    for k, v in inputs.items():  # a tuple input is saved keyed "0", "1", ...
        tensors = {str(j): t for j, t in enumerate(v)} if isinstance(v, tuple) else {k: v}
        safetensors_io.save(tensors, os.path.join(OUT, f"{name}.{k}.safetensors"))
    safetensors_io.save(expected, os.path.join(OUT, f"{name}.expected.safetensors"))
    print(name, {k: tuple(v.shape) for k, v in expected.items()})


os.makedirs(OUT, exist_ok=True)
# Spec: Sequential(Linear(6, 16), ReLU(), Dropout(0.1), Linear(16, 3))
case("mlp_shared",
     lambda: nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 3)),
     {"input": torch.randn(7, 6)})
# Spec: Sequential(Linear(6, 16), LayerNorm((16,), eps=1e-5), Tanh(), Linear(16, 3, bias=True))
case("layernorm_per_set",
     lambda: nn.Sequential(nn.Linear(6, 16), nn.LayerNorm((16,), eps=1e-5), nn.Tanh(),
                           nn.Linear(16, 3, bias=True)),
     {"input": torch.randn(SETS, 7, 6)}, per_set=("input",))
# Spec: Sequential(Linear(6, 8), BatchNorm1d(8), GELU(), Linear(8, 2))
case("batchnorm_eval",
     lambda: nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.GELU(), nn.Linear(8, 2)),
     {"input": torch.randn(7, 6)})
# Spec: Sequential(Conv2d(2, 4, (3, 3), padding=1), ReLU(), MaxPool2d(2), Flatten(), Linear(16, 3))
case("cnn",
     lambda: nn.Sequential(nn.Conv2d(2, 4, (3, 3), padding=1), nn.ReLU(), nn.MaxPool2d(2),
                           nn.Flatten(), nn.Linear(16, 3)),
     {"input": torch.randn(2, 2, 4, 4)})
# Spec: MultiheadAttention(8, 2, batch_first=True); query per set, key and value shared
case("mha", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
     {"query": torch.randn(SETS, 2, 5, 8), "key": torch.randn(2, 5, 8),
      "value": torch.randn(2, 5, 8)}, per_set=("query",))
# Spec: Sequential(Conv2d(2, 3, 3, padding=1), AvgPool2d(3, stride=2, padding=1,
#   ceil_mode=True, count_include_pad=False), Flatten(), Linear(27, 2)); input per set
case("cnn_avgpool",
     lambda: nn.Sequential(nn.Conv2d(2, 3, 3, padding=1),
                           nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True,
                                        count_include_pad=False),
                           nn.Flatten(), nn.Linear(27, 2)),
     {"input": torch.randn(SETS, 2, 2, 4, 4)}, per_set=("input",))
# Spec: LSTM(4, 8, num_layers=2, batch_first=True); outputs (output, (h_n, c_n))
case("lstm", lambda: nn.LSTM(4, 8, num_layers=2, batch_first=True),
     {"input": torch.randn(2, 6, 4)})
# Spec: LSTM(4, 6, proj_size=3, bidirectional=True); input and hx = (h_0, c_0) per set
case("lstm_hx", lambda: nn.LSTM(4, 6, proj_size=3, bidirectional=True),
     {"input": torch.randn(SETS, 5, 2, 4),
      "hx": (torch.randn(SETS, 2, 2, 3), torch.randn(SETS, 2, 2, 6))}, per_set=("input", "hx"))
# Spec: GRU(4, 6, num_layers=2, batch_first=True); h0 per set
case("gru", lambda: nn.GRU(4, 6, num_layers=2, batch_first=True),
     {"input": torch.randn(2, 5, 4), "hx": torch.randn(SETS, 2, 2, 6)}, per_set=("hx",))
# Spec: RNN(4, 5, nonlinearity='relu', bias=False); unbatched input [T, in]
case("rnn_unbatched", lambda: nn.RNN(4, 5, nonlinearity="relu", bias=False),
     {"input": torch.randn(7, 4)})

# Spec: TransformerEncoderLayer(16, 2, 32, batch_first=True), 3 sets; src and a key padding
# mask shared; non-zero biases and LayerNorm affines
def transformer_layer():
    m = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    with torch.no_grad():
        for n, p in m.named_parameters():
            if n.endswith("bias") or n.startswith("norm"):
                p.add_(torch.randn_like(p) * 0.3)
    return m


case("transformer", transformer_layer,
     {"src": torch.randn(2, 6, 16),
      "src_key_padding_mask": torch.tensor([[False] * 4 + [True] * 2, [False] * 6])},
     sets=3, grad=True)

# Spec: Sequential(Conv1d(3, 4, 3, padding='same', padding_mode='circular'), GroupNorm(2, 4),
#   MaxPool1d(2), InstanceNorm1d(4, affine=True, track_running_stats=True),
#   Conv1d(4, 4, 2, stride=2, groups=2, bias=False), AdaptiveAvgPool1d(1), Flatten(),
#   Linear(4, 2)); per set
case("layers1d",
     lambda: nn.Sequential(nn.Conv1d(3, 4, 3, padding="same", padding_mode="circular"),
                           nn.GroupNorm(2, 4), nn.MaxPool1d(2),
                           nn.InstanceNorm1d(4, affine=True, track_running_stats=True),
                           nn.Conv1d(4, 4, 2, stride=2, groups=2, bias=False),
                           nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(4, 2)),
     {"input": torch.randn(SETS, 2, 3, 8)}, per_set=("input",))
# Spec: Sequential(Conv2d(2, 4, 3), AdaptiveMaxPool2d((None, 2)), InstanceNorm2d(4),
#   AdaptiveAvgPool2d((2, 1)), Flatten(), Linear(8, 2))
case("layers2d",
     lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.AdaptiveMaxPool2d((None, 2)),
                           nn.InstanceNorm2d(4), nn.AdaptiveAvgPool2d((2, 1)), nn.Flatten(),
                           nn.Linear(8, 2)),
     {"input": torch.randn(2, 2, 6, 6)})
# Spec: Sequential(Linear(6, 8), PReLU(8), Linear(8, 8), Mish(), Softplus(beta=2, threshold=5),
#   Unflatten(1, (2, 4)), GLU(), Flatten(), Hardswish(), Linear(4, 3), LeakyReLU(0.1));
#   every set's PReLU weights its own
def activations():
    m = nn.Sequential(nn.Linear(6, 8), nn.PReLU(8), nn.Linear(8, 8), nn.Mish(),
                      nn.Softplus(beta=2, threshold=5), nn.Unflatten(1, (2, 4)), nn.GLU(),
                      nn.Flatten(), nn.Hardswish(), nn.Linear(4, 3), nn.LeakyReLU(0.1))
    with torch.no_grad():
        m[1].weight.copy_(torch.rand(8) - 0.5)
    return m


case("activations", activations, {"input": torch.randn(7, 6) * 2})

with open(os.path.join(OUT, "mlp_shared.params.safetensors"), "rb") as f:
    data = f.read()
with open(os.path.join(OUT, "corrupt.safetensors"), "wb") as f:
    f.write(data[: len(data) // 2])


# `run --loss NAME --target FILE`: "output" and each set's "loss" against the target, shared or
# per set (--target-in-dim 0); written after the cases above so that their data stays the same
def loss_case(name, make, x, target, loss, per_set_target=False, **kw):
    models = [make().eval() for _ in range(SETS)]
    with torch.no_grad():
        outs = [m(x) for m in models]
        losses = [loss(o, target[i] if per_set_target else target, **kw)
                  for i, o in enumerate(outs)]
    safetensors_io.save(stacked_state(models), os.path.join(OUT, f"{name}.params.safetensors"))
    safetensors_io.save({"input": x}, os.path.join(OUT, f"{name}.input.safetensors"))
    safetensors_io.save({"target": target}, os.path.join(OUT, f"{name}.target.safetensors"))
    expected = {"output": torch.stack(outs), "loss": torch.stack(losses)}
    safetensors_io.save(expected, os.path.join(OUT, f"{name}.expected.safetensors"))
    print(name, {k: tuple(v.shape) for k, v in expected.items()})


# Spec: Sequential(Linear(6, 16), ReLU(), Linear(16, 4)); cross_entropy, mean, one target ignored
loss_case("xent", lambda: nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)),
          torch.randn(7, 6), torch.tensor([0, 3, 1, -100, 2, 2, 1]),
          torch.nn.functional.cross_entropy)
# the same with a target per set and reduction sum
loss_case("xent_per_set", lambda: nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 4)),
          torch.randn(7, 6), torch.randint(0, 4, (SETS, 7)), torch.nn.functional.cross_entropy,
          per_set_target=True, reduction="sum")
# Spec: Sequential(Linear(6, 8), Tanh(), Linear(8, 3)); mse_loss, none
loss_case("mse_none", lambda: nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 3)),
          torch.randn(7, 6), torch.randn(7, 3), torch.nn.functional.mse_loss, reduction="none")
