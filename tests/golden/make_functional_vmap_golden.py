#!/usr/bin/python3
"""Golden data for tests/functional_vmap_golden_test.cpp, computed with PyTorch 1.13's functorch
vmap over combine_state_for_ensemble (and cross-checked against a plain loop over the models).

Run from the repository root: /usr/bin/python3 tests/golden/make_functional_vmap_golden.py
Writes tests/data/functional_vmap/<case>.safetensors with keys:
  params.<dotted name>   stacked parameters and buffers, leading dim = number of sets
  input.<name>           the forward's inputs (kwargs), per set when in_dims says so
  output / output.<i>    expected outputs, leading dim = number of sets
  after.<dotted name>    buffers after the call (BatchNorm in training)
"""
import copy
import os
import sys

import torch
from torch import nn
from functorch import vmap, combine_state_for_ensemble

sys.path.insert(0, os.path.dirname(__file__))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "data", "functional_vmap")
SETS = 3
torch.manual_seed(0)


def stacked(models):
    names = [n for n, _ in models[0].named_parameters()] + [n for n, _ in models[0].named_buffers()]
    state = [dict(list(m.named_parameters()) + list(m.named_buffers())) for m in models]
    return {n: torch.stack([s[n].detach() for s in state]) for n in names}


def case(name, make, inputs, per_set=(), train=False, randomize_buffers=False):
    models = [make() for _ in range(SETS)]
    for m in models:
        m.train(train)
        if randomize_buffers:
            for bname, b in m.named_buffers():
                if b.dtype.is_floating_point:
                    b.copy_(torch.rand_like(b) + 0.5 if "var" in bname else torch.randn_like(b))
    params_before = stacked(models)
    loop_models = [copy.deepcopy(m) for m in models]
    fmodel, params, buffers = combine_state_for_ensemble(models)
    args = [inputs[k] for k in inputs]
    in_dims = (0, 0) + tuple(0 if k in per_set else None for k in inputs)
    with torch.no_grad():
        out = vmap(fmodel, in_dims=in_dims)(params, buffers, *args)
        outs = []
        for i, m in enumerate(loop_models):
            outs.append(m(*[inputs[k][i] if k in per_set else inputs[k] for k in inputs]))
    tensors = {f"params.{k}": v for k, v in params_before.items()}
    for k, v in inputs.items():
        tensors[f"input.{k}"] = v
    if isinstance(out, tuple):
        for i, o in enumerate(out):
            ref = torch.stack([x[i] for x in outs])
            assert torch.allclose(o, ref, rtol=1e-5, atol=1e-6), (name, i)
            tensors[f"output.{i}"] = o
    else:
        ref = torch.stack(outs)
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-6), name
        tensors["output"] = out
    if train:
        names = [n for n, _ in models[0].named_buffers()]
        for j, n in enumerate(names):
            after = buffers[j]
            ref = torch.stack([dict(m.named_buffers())[n] for m in loop_models])
            assert torch.allclose(after.to(ref.dtype), ref, rtol=1e-5, atol=1e-6), (name, n)
            tensors[f"after.{n}"] = after
    safetensors_io.save(tensors, os.path.join(OUT, f"{name}.safetensors"))
    print(name, {k: tuple(v.shape) for k, v in tensors.items() if not k.startswith("params")})


os.makedirs(OUT, exist_ok=True)
mlp = lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
case("mlp_shared", mlp, {"input": torch.randn(5, 4)})
case("mlp_per_set", mlp, {"input": torch.randn(SETS, 5, 4)}, per_set=("input",))
case("layernorm_mlp",
     lambda: nn.Sequential(nn.Linear(4, 8), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 2)),
     {"input": torch.randn(5, 4)})
bn = lambda: nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU())
case("batchnorm_train", bn, {"input": torch.randn(SETS, 7, 4)}, per_set=("input",), train=True)
case("batchnorm_eval", bn, {"input": torch.randn(7, 4)}, randomize_buffers=True)
case("cnn",
     lambda: nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                           nn.Flatten(), nn.Linear(16, 3)),
     {"input": torch.randn(2, 2, 4, 4)})
case("embedding", lambda: nn.Embedding(10, 4), {"input": torch.randint(0, 10, (2, 5))})
case("mha", lambda: nn.MultiheadAttention(8, 2, batch_first=True),
     {"query": torch.randn(2, 5, 8), "key": torch.randn(2, 5, 8), "value": torch.randn(2, 5, 8)})
