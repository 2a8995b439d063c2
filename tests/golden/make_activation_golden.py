#!/usr/bin/python3
"""Golden data of tests/activation_ops_test.cpp (the activation ops and modules, PReLU) and of its
functional_vmap cases, computed with PyTorch 1.13.

Run from the repository root: /usr/bin/python3 tests/golden/make_activation_golden.py
Writes tests/data/modules/activation_ops.safetensors ("input32", "input64", "ints" and one key per
op, variant and dtype) and tests/data/functional_vmap/<case>.safetensors in the format of
make_functional_vmap_golden.py (params.*, input.*, output; the
expected output is a loop over the models).
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_io  # noqa: E402

HERE = os.path.dirname(__file__)
SETS = 3
torch.manual_seed(0)

inf, nan = float("inf"), float("nan")
special = [-0.0, 0.0, inf, -inf, nan, 1e-8, -1e-8, 1e-30, -1e-30, 1e-3, -1e-3, 100.0, -100.0,
           30.0, -30.0, 20.0, -20.0, 20.5, -20.5, 88.0, -88.0, 90.0, -90.0, 1e4, -1e4, 2.9, -2.9,
           3.0, -3.0, 3.1, -3.1, 6.0, 6.1, -6.0, 1.0, -1.0, 5.0, 5.5, 10.0, 10.5]
x64 = torch.tensor(special + torch.linspace(-12, 12, 97).tolist(), dtype=torch.float64)
x32 = x64.float()

ops = {
    "silu": F.silu, "selu": F.selu, "mish": F.mish, "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid, "relu6": F.relu6, "softsign": F.softsign,
    "tanhshrink": F.tanhshrink, "logsigmoid": F.logsigmoid,
    "leaky_relu": F.leaky_relu, "leaky_relu_0.2": lambda x: F.leaky_relu(x, 0.2),
    "elu": F.elu, "elu_0.5": lambda x: F.elu(x, 0.5),
    "celu": F.celu, "celu_2": lambda x: F.celu(x, 2.0),
    "softplus": F.softplus, "softplus_2_10": lambda x: F.softplus(x, 2, 10),
    "softplus_0.5_5": lambda x: F.softplus(x, 0.5, 5),
    "hardtanh": F.hardtanh, "hardtanh_-2_3": lambda x: F.hardtanh(x, -2.0, 3.0),
}
t = {"input32": x32, "input64": x64}
for name, f in ops.items():
    t[name + ".f32"] = f(x32)
    t[name + ".f64"] = f(x64)
g = torch.linspace(-3, 3, 24).reshape(4, 6)
t["glu_input"] = g
t["glu"] = F.glu(g)
t["glu_0"] = F.glu(g, 0)
ints = torch.tensor([-9, -7, -6, -3, -2, -1, 0, 1, 2, 3, 5, 6, 7, 100])
t["ints"] = ints
for name in ["relu6", "hardtanh", "softsign", "tanhshrink"]:
    t[name + ".int"] = ops[name](ints)
t["hardtanh_-2_3.int"] = F.hardtanh(ints, -2, 3)
p = torch.randn(2, 3, 4)
t["prelu_input"] = p
t["prelu_weight"] = torch.tensor([0.1, -0.5, 2.0])
t["prelu"] = F.prelu(p, t["prelu_weight"])
t["prelu_1"] = F.prelu(p, torch.tensor([0.3]))
t["prelu_1d"] = F.prelu(p[0, 0], torch.tensor([0.3]))
safetensors_io.save(t, os.path.join(HERE, "..", "data", "modules", "activation_ops.safetensors"))


def stacked(models):
    names = [n for n, _ in models[0].named_parameters()]
    state = [dict(m.named_parameters()) for m in models]
    return {n: torch.stack([s[n].detach() for s in state]) for n in names}


def case(name, make, inputs, per_set=()):
    models = [make() for _ in range(SETS)]
    with torch.no_grad():
        for m in models:  # every set's PReLU weights its own
            for pname, prm in m.named_parameters():
                if isinstance(dict(m.named_modules())[pname.rpartition(".")[0]], nn.PReLU):
                    prm.copy_(torch.rand_like(prm) - 0.5)
    params_before = stacked(models)
    # functorch 1.13's vmap cannot batch prelu's weight, so the expected output is a loop
    with torch.no_grad():
        out = torch.stack([m(*[v[i] if k in per_set else v for k, v in inputs.items()])
                           for i, m in enumerate(models)])
    tensors = {f"params.{k}": v for k, v in params_before.items()}
    tensors.update({f"input.{k}": v for k, v in inputs.items()})
    tensors["output"] = out
    safetensors_io.save(tensors, os.path.join(HERE, "..", "data", "functional_vmap",
                                              f"{name}.safetensors"))
    print(name, sorted(tensors))


def activation_mlp():
    return nn.Sequential(nn.Linear(4, 6), nn.PReLU(6), nn.Linear(6, 8), nn.SiLU(), nn.LeakyReLU(0.2),
                         nn.ELU(0.7), nn.Softplus(2, 3), nn.Hardswish(), nn.GLU(), nn.Linear(4, 3),
                         nn.PReLU())


case("activation_mlp", activation_mlp, {"input": torch.randn(5, 4) * 3})
case("prelu_channels", lambda: nn.Sequential(nn.Conv2d(2, 3, 1), nn.PReLU(3), nn.Mish(),
                                             nn.Hardtanh(-0.5, 0.7), nn.CELU(1.5), nn.SELU(),
                                             nn.ReLU6(), nn.Hardsigmoid(), nn.Softsign(),
                                             nn.Tanhshrink(), nn.LogSigmoid()),
     {"input": torch.randn(SETS, 2, 2, 3, 3) * 3}, per_set=("input",))
